# a bad --device value: exit 2, the message's subject is the option, not a file; nothing written
rc=0
"$T" to-cuda "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" --device gpu7 || rc=$?
absent "$W/x.pt"
exit "$rc"
