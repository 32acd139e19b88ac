# --force replaces an existing OUT with the rewritten checkpoint
printf 'old contents' >"$W/out.pt"
"$T" to-cpu -q --force "$S/tiny_mlp_cuda0.pt" -o "$W/out.pt"
"$T" inspect "$W/out.pt"
