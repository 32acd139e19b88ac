# a rewrite never changes its input
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
before=$(sum "$W/m.pt")
"$T" to-cpu -q "$W/m.pt" -o "$W/out.pt"
"$T" to-cpu -q --dtype bfloat16 "$W/m.pt" -o "$W/out16.pt"
[ -s "$W/out.pt" ] && [ -s "$W/out16.pt" ] || fail "the rewrites wrote nothing"
unchanged "$W/m.pt" "$before"
