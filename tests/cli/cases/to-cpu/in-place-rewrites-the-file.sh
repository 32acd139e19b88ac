# --in-place replaces the input with its cpu version, leaving no temporary
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
"$T" to-cpu -q --in-place "$W/m.pt"
no_temporaries "$W"
"$T" inspect "$W/m.pt"
