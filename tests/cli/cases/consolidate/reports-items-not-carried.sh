# consolidate to .pt carries the items torch 1.13 and 2.x load with weights_only=True and lists the others
"$T" consolidate "$S/dcp/ws2_sharded" -o "$W/m.pt"
