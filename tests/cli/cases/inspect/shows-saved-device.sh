# inspect lists each tensor with the device its storage was saved on
"$T" inspect "$S/tiny_mlp_cuda0.pt"
