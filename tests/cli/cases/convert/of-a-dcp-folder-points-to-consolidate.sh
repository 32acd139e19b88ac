# convert of a distributed checkpoint: exit 2, pointing to consolidate; nothing written
rc=0
"$T" convert "$S/dcp/ws2_sharded" "$W/x.safetensors" || rc=$?
absent "$W/x.safetensors"
exit "$rc"
