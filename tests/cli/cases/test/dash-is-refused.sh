# test - : a checkpoint is not read from standard input; one line saying a seekable file is needed
"$T" test - <"$S/tiny_mlp_cuda0.pt"
