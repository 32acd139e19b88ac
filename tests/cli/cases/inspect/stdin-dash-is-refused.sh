# inspect - : standard input is not read (checkpoints are read by seeking); one line saying so
"$T" inspect - <"$S/tiny_mlp_cuda0.pt"
