# consolidate --from naming no entry of the checkpoint is a usage error that names --from (the
# option given) and lists the top-level entries
"$T" consolidate "$S/dcp/ws2_sharded" -o "$W/x.safetensors" --from model
