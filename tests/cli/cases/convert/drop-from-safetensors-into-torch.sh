# --drop/--only-keys on a safetensors input written as torch (convert, extract, a set joined into
# one .pt): the tensors left out are gone (no empty names written), counted on the summary line
"$T" convert -q "$S/tiny_mlp_cuda0.pt" "$W/m.safetensors"
"$T" convert -q "$W/m.safetensors" "$W/a.pt" --drop 'fc1.*'
"$T" extract -q "$W/m.safetensors" -o "$W/b.pt" --only-keys 'fc2.*'
bin_set "$W"
"$T" convert -q "$W/st/model.safetensors.index.json" "$W/c.pt" --drop 'a.*'
for f in a b c; do
    "$T" inspect --json "$W/$f.pt" | "$PY" -c 'import json, sys; print(sorted(t["name"] for t in json.load(sys.stdin)["tensors"]))'
done
"$T" convert "$W/m.safetensors" "$W/d.pt" --drop 'fc2.*'
