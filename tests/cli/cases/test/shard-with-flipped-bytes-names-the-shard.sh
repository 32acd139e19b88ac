# a .bin set whose second shard has flipped tensor bytes: the set's test names that shard and its storage
mkdir set
cp "$S"/sharded/pytorch_model* set/
"$PY" "$H/flip_bytes.py" set/pytorch_model-00002-of-00002.bin /data/0 4
"$T" test -q set/pytorch_model.bin.index.json
