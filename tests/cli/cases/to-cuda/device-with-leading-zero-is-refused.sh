# cuda:01 is no device string torch accepts (c10: no leading zero in the index): refused by name
rc=0
"$T" to-cuda "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" --device cuda:01 || rc=$?
absent "$W/x.pt"
exit "$rc"
