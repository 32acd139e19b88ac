# --max-shard-size asks for a sharded set (as extract's and consolidate's): OUT named as one file is a
# usage error naming OUT, nothing written
rc=0; "$T" convert "$S/tiny_mlp_cuda0.pt" "$W/m.safetensors" --max-shard-size 1KB || rc=$?
absent "$W/m.safetensors"
exit "$rc"
