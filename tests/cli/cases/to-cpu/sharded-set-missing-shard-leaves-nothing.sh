# a set whose index lists a missing shard: exit 3, and no shard of the new set is left
bin_set "$W"
rm "$W/bin/pytorch_model-00002-of-00002.bin"
rc=0
"$T" to-cpu "$W/bin/pytorch_model.bin.index.json" -o "$W/cpu2" || rc=$?
absent "$W/cpu2/pytorch_model-00001-of-00002.bin"
absent "$W/cpu2/pytorch_model.bin.index.json"
exit "$rc"
