# a --map without FROM=TO: exit 2, no file subject, nothing written
rc=0
"$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" --map cuda:0 || rc=$?
absent "$W/x.pt"
exit "$rc"
