# an existing OUT without --force: exit 2, the subject is the output; it is left as it was
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
printf 'precious' >"$W/out.pt"
before=$(sum "$W/out.pt")
rc=0
"$T" to-cpu "$W/m.pt" -o "$W/out.pt" || rc=$?
unchanged "$W/out.pt" "$before"
no_temporaries "$W"
exit "$rc"
