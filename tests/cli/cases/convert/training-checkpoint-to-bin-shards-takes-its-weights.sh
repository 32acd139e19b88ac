# one training checkpoint to a set of .bin shards: its weights, as for safetensors (a set holds state_dicts)
mkdir out
"$T" convert "$S/optimizer_ckpt_cuda1.pt" out/ --format pt --max-shard-size 1KB
ls out
