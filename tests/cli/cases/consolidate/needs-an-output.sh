# consolidate without -o: exit 2, the message names no file; nothing written
"$T" consolidate "$S/dcp/ws2_sharded"
