# OUT equal to the input: exit 2, pointing at --in-place; the input is untouched
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
before=$(sum "$W/m.pt")
rc=0
"$T" to-cpu "$W/m.pt" -o "$W/m.pt" || rc=$?
unchanged "$W/m.pt" "$before"
no_temporaries "$W"
exit "$rc"
