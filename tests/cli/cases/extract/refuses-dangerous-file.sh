# a file that runs code when loaded is refused (only tensors would go out, but it is malicious)
rc=0
"$T" extract "$S/corpus/torch-2.15/malicious.pt" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
