# extract -o DIR/ --max-shard-size writes a sharded set in DIR, as convert and consolidate do (one option,
# one meaning); with a one-file OUT it is refused as theirs is
"$T" extract -q "$S/lightning_dp_cpu.ckpt" -o set/ --format safetensors --max-shard-size 100
ls set
"$T" extract "$S/lightning_dp_cpu.ckpt" -o "$W/one.safetensors" --max-shard-size 100
