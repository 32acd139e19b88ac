# --keep chooses what --dtype casts: without --dtype it is a usage error; nothing written
rc=0
"$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" --keep '*' || rc=$?
absent "$W/x.pt"
exit "$rc"
