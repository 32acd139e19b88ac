# a file that runs code when loaded is refused (only tensors would go out, but it is malicious)
rc=0
"$T" extract "$C/torch-2.14/malicious.pt" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
