# --map cpu=meta: a storage tagged meta loads without its data: refused by name
rc=0
"$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" --map cuda:0=meta || rc=$?
absent "$W/x.pt"
exit "$rc"
