# a set written with --force over an earlier set removes the shards the old index named, listed; nothing else
"$T" extract -q "$S/tiny_mlp_cuda0.pt" -o "$W/set/model.safetensors.index.json" --max-shard-size 100
printf 'kept' >"$W/set/README.md"
"$T" extract "$S/tiny_mlp_cuda0.pt" -o "$W/set/model.safetensors.index.json" --force 2>&1 | sed 1d >&2
ls "$W/set"
