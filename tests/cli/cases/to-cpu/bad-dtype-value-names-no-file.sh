# a --dtype that is not a floating-point target: exit 2, no file subject, nothing written
rc=0
"$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" --dtype int8 || rc=$?
absent "$W/x.pt"
exit "$rc"
