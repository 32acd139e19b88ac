# a safetensors index: every tensor of every shard, with the shard it is in
"$PY" "$H/make_shards.py" "$W"
"$T" inspect "$W/model.safetensors.index.json"
