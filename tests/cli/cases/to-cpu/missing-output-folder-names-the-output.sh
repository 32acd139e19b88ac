# OUT in a folder that does not exist: exit 1, one line whose subject is the output
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
"$T" to-cpu "$W/m.pt" -o "$W/no/such/dir/x.pt"
