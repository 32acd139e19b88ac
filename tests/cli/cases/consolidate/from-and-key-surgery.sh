# consolidate --from takes one entry, named relative to it; key surgery applies after it
"$T" consolidate -q "$S/dcp/ws2_sharded" -o "$W/b.safetensors" --from bf16 --drop '*.bias' --add-prefix layer.
"$T" inspect "$W/b.safetensors" | grep '^layer\.' | cut -c1-40
