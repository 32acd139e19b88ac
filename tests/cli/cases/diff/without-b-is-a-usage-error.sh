# diff needs two files: exit 2, one line
"$T" diff "$S/tiny_mlp_cuda0.pt"
