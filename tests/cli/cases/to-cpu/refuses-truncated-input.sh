# a truncated input: exit 3, the subject is the input, no OUT, no temporary
head -c 3000 "$S/tiny_mlp_cuda0.pt" >"$W/trunc.pt"
rc=0
"$T" to-cpu "$W/trunc.pt" -o "$W/t.pt" || rc=$?
absent "$W/t.pt"
no_temporaries "$W"
exit "$rc"
