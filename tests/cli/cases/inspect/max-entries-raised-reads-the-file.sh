# the same file reads once --max-entries is raised above its entry count
"$T" inspect --max-entries 100 "$S/tiny_mlp_cuda0.pt"
