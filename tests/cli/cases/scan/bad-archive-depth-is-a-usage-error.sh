# --max-archive-depth takes a whole number from 0 to 64
"$T" scan --max-archive-depth -1 "$S/tiny_mlp_cuda0.pt"
