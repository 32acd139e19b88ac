# to-cpu of a set over shards already in OUTDIR: exit 2, the subject is the existing shard
bin_set "$W"
"$T" to-cpu -q "$W/bin/pytorch_model.bin.index.json" -o "$W/cpu"
before=$(sum "$W/cpu/pytorch_model-00001-of-00002.bin")
rc=0
"$T" to-cpu "$W/bin/pytorch_model.bin.index.json" -o "$W/cpu" || rc=$?
unchanged "$W/cpu/pytorch_model-00001-of-00002.bin" "$before"
no_temporaries "$W/cpu"
exit "$rc"
