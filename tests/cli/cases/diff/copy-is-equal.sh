# diff of a file with its copy: exit 0, every tensor equal bit for bit
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
"$T" diff "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
