# diff of two different checkpoints: exit 1, the names only in A listed with '-'
"$T" diff "$S/tiny_mlp_cuda0.pt" "$S/tied_views_cpu.pt"
