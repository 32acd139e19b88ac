# convert of a safetensors index to a .bin index: one .bin shard per input shard (16-byte cap)
bin_set "$W"
ls "$W/bin"
