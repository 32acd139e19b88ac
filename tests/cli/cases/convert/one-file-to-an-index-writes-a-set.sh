# convert of one file to NAME.safetensors.index.json with --max-shard-size writes a sharded set, as extract
# does (the set driver, planned from the one file); the shards are named as transformers names them
mkdir set
"$T" convert "$S/tiny_mlp_cuda0.pt" set/model.safetensors.index.json --max-shard-size 1KB
ls set
