# the views a safetensors file records in __metadata__ "tensorctl.aliases" are tensors of the file:
# inspect and diff see them, key surgery renames them with the tensor they view, --drop of that
# tensor leaves the view as a tensor of its own, --drop of the view removes it
"$T" convert -q "$S/corpus/torch-2.15/lm_cpu.pt" "$W/lm.safetensors"
"$T" diff -q "$S/corpus/torch-2.15/lm_cpu.pt" "$W/lm.safetensors"
"$T" convert -q "$W/lm.safetensors" "$W/a.safetensors" --add-prefix module.
"$T" convert -q "$W/a.safetensors" "$W/a.pt"
"$T" diff -q "$W/a.pt" "$S/corpus/torch-2.15/lm_cpu.pt" --strip-prefix
"$T" convert -q "$W/lm.safetensors" "$W/b.safetensors" --drop 'embed.*'
"$T" convert -q "$W/lm.safetensors" "$W/c.safetensors" --drop head.weight
for f in a b c; do
    "$T" inspect --json "$W/$f.safetensors" | "$PY" -c 'import json, sys
j = json.load(sys.stdin)
print(len(j["tensors"]), len(j["storages"]), sorted(t["name"] for t in j["tensors"] if "head" in t["name"] or "embed" in t["name"]))'
done
