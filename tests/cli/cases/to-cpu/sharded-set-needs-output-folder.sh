# to-cpu of a sharded set without -o: exit 2 (new shards need a folder)
bin_set "$W"
"$T" to-cpu "$W/bin/pytorch_model.bin.index.json"
