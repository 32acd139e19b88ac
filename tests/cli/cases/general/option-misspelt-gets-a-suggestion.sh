# a misspelt long option (--jsn): exit 2, with the option it is one slip from
"$T" inspect --jsn "$S/tiny_mlp_cuda0.pt"
