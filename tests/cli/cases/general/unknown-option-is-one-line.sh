# an unknown option: exit 2 and one line (no file subject: nothing was opened)
"$T" inspect --frob "$S/tiny_mlp_cuda0.pt"
