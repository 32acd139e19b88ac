# a prefix several options share (--max): exit 2, naming every option it could be
"$T" inspect --max "$S/tiny_mlp_cuda0.pt"
