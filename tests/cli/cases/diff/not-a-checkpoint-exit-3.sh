# a file that is not a checkpoint: exit 3 (bad input), one line naming it
printf 'hello\n' >"$W/text.pt"
"$T" diff "$S/tiny_mlp_cuda0.pt" "$W/text.pt"
