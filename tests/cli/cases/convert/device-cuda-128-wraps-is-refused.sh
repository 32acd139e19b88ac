# cuda:128: torch keeps device indices in 8 bits and would read it as cuda:-128: refused
rc=0
"$T" convert "$S/tiny_mlp_cuda0.pt" "$W/x.pt" -d cuda:128 || rc=$?
absent "$W/x.pt"
exit "$rc"
