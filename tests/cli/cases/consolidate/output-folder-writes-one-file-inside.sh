# consolidate DIR -o OUTDIR (an existing folder) writes one file OUTDIR/NAME.EXT, NAME the checkpoint
# folder's, EXT --format's; a sharded set takes --max-shard-size (or --part, or an index name)
mkdir out
"$T" consolidate -q "$S/dcp/ws2_sharded" -o out --format safetensors
"$T" consolidate -q "$S/dcp/ws2_sharded/" -o out/ --format pt
"$T" consolidate -q "$S/dcp/ws2_sharded" -o out/set/ --format safetensors --max-shard-size 500
ls out out/set
"$T" inspect -q out/ws2_sharded.pt
