# a truncated download: exit 3, one line saying so
head -c 3000 "$S/tiny_mlp_cuda0.pt" >"$W/trunc.pt"
"$T" diff "$S/tiny_mlp_cuda0.pt" "$W/trunc.pt"
