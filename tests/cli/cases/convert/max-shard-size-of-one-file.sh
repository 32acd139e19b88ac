# --max-shard-size on convert of one file (not an index) is a usage error pointing to extract, which
# shards one file; nothing is written
rc=0; "$T" convert "$S/tiny_mlp_cuda0.pt" "$W/m.safetensors" --max-shard-size 1KB || rc=$?
absent "$W/m.safetensors"
exit "$rc"
