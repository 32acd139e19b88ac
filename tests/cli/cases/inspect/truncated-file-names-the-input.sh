# a truncated download: exit 3, one line whose subject is the input, saying it is truncated
head -c 3000 "$S/tiny_mlp_cuda0.pt" >"$W/trunc.pt"
"$T" inspect "$W/trunc.pt"
