# diff's own 1 means "different", so a file it cannot read is exit 5, one line naming it
"$T" diff "$S/tiny_mlp_cuda0.pt" "$W/nope.pt"
