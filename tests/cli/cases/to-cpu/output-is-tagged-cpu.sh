# every storage of a to-cpu output is tagged cpu
"$T" to-cpu -q "$S/tiny_mlp_cuda0.pt" -o "$W/out.pt"
"$T" inspect --json "$W/out.pt" >"$W/json"
grep -q '"device":"cpu"' "$W/json" || fail "no storage tagged cpu"
! grep '"device":"cuda' "$W/json" >&2 || fail "storages still tagged cuda"
