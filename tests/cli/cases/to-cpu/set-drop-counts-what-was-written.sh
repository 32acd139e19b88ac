# to-cpu of a sharded set with --drop: the "wrote" line counts the tensors and bytes the new shards
# hold (sample_models/sharded: 11 tensors, the 5 of blocks.1 dropped)
"$T" to-cpu "$S/sharded/pytorch_model.bin.index.json" -o "$W/set/" --drop 'blocks.1.*'
"$T" inspect "$W/set/pytorch_model.bin.index.json" | grep ' tensors on '
