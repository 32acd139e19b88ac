# a misspelt command (two letters swapped): exit 2, with the command meant
"$T" inpsect "$S/tiny_mlp_cuda0.pt"
