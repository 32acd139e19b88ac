# every storage of a to-cuda --device cuda:1 output is tagged cuda:1
"$T" to-cpu -q "$S/tiny_mlp_cuda0.pt" -o "$W/cpu.pt"
"$T" to-cuda -q "$W/cpu.pt" -o "$W/out.pt" --device cuda:1
"$T" inspect --json "$W/out.pt" >"$W/json"
grep -q '"device":"cuda:1"' "$W/json" || fail "no storage tagged cuda:1"
! grep -v '"device":"cuda:1"' "$W/json" | grep '"device":' >&2 || fail "storages on another device"
