# convert of an index to OUT named as a file (not a folder, not an index): the set joined into
# that one file, no index beside it; --max-shard-size there is a usage error
bin_set "$W"
"$T" convert -q "$W/st/model.safetensors.index.json" "$W/one.pt"
"$T" diff -q "$W/st/model.safetensors.index.json" "$W/one.pt"
ls "$W"
"$T" convert --max-shard-size 1KB "$W/st/model.safetensors.index.json" "$W/two.safetensors"
