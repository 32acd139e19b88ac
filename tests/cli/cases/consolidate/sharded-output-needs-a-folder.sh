# --max-shard-size with a one-file OUT: exit 2 naming OUT; nothing written
rc=0
"$T" consolidate "$S/dcp/ws2_sharded" -o "$W/x.safetensors" --max-shard-size 1KB || rc=$?
absent "$W/x.safetensors"
exit "$rc"
