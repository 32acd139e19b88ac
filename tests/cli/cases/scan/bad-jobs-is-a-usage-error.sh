# --jobs takes a whole number from 1
"$T" scan --jobs 0 "$S/tiny_mlp_cuda0.pt"
