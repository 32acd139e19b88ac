# to-cpu of an index rewrites the set shard by shard: -o named as a checkpoint file is refused
# (not made a folder of that name), pointing to convert, which joins a set into one file
bin_set "$W"
rc=0; "$T" to-cpu "$W/bin/pytorch_model.bin.index.json" -o "$W/one.bin" || rc=$?
absent "$W/one.bin"
exit "$rc"
