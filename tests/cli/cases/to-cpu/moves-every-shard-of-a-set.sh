# to-cpu of a .bin index moves every shard to the cpu and writes the index and shards to -o
bin_set "$W"
"$T" to-cpu -q "$W/bin/pytorch_model.bin.index.json" -o "$W/cpu"
"$T" inspect --json "$W/cpu/pytorch_model.bin.index.json" >"$W/json"
! grep '"device":"cuda' "$W/json" >&2 || fail "the moved set still has cuda storages"
grep -q '"shard":"pytorch_model-00002-of-00002.bin"' "$W/json" || fail "the moved set does not name its second shard"
ls "$W/cpu"
