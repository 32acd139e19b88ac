# to-cuda --dtype float16 --device cuda:1 of a set: every tensor of every shard cast and moved
bin_set "$W"
"$T" to-cuda -q "$W/bin/pytorch_model.bin.index.json" -o "$W/half" --dtype float16 --device cuda:1
"$T" inspect --json "$W/half/pytorch_model.bin.index.json" >"$W/json"
[ "$(grep -o '"dtype":"float16"' "$W/json" | wc -l)" -ge 3 ] || fail "not every tensor is float16"
! grep '"dtype":"float32"' "$W/json" >&2 || fail "float32 left in the cast set"
grep -q '"device":"cuda:1"' "$W/json" || fail "no storage tagged cuda:1"
! grep '"device":"cuda:0"' "$W/json" >&2 || fail "cuda:0 left in the moved set"
