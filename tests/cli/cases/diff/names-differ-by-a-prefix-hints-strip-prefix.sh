# diff of a state_dict and its DataParallel-named copy (module. before every name): no name in both,
# and a note says --strip-prefix matches them
"$T" convert -q "$S/tiny_mlp_cuda0.pt" --add-prefix module. "$W/dp.pt"
rc=0
"$T" diff "$S/tiny_mlp_cuda0.pt" "$W/dp.pt" >"$W/out" || rc=$?
tail -1 "$W/out"
"$T" diff --strip-prefix "$S/tiny_mlp_cuda0.pt" "$W/dp.pt" >/dev/null
exit "$rc"
