# consolidate --device tags every storage of a .pt output; the tensors keep their global shapes
"$T" consolidate -q "$S/dcp/ws2_sharded" -o "$W/m.pt" --device cuda:1 --only-keys 'rows' --only-keys 'cols'
"$T" inspect "$W/m.pt" | grep -E '^(rows|cols) ' | cut -c1-50
