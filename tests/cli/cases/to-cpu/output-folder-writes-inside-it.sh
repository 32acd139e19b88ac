# -o DIR for one file writes DIR/NAME, as cp does (never "cannot rename ... Is a directory")
mkdir out
rc=0; "$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o out || rc=$?
"$T" inspect --json out/tiny_mlp_cuda0.pt >out.json
grep -q '"device":"cpu"' out.json && ! grep -q '"device":"cuda' out.json || fail "out/tiny_mlp_cuda0.pt is not on the CPU"
[ "$(ls -A out)" = tiny_mlp_cuda0.pt ] || fail "out holds $(ls out)"
exit "$rc"
