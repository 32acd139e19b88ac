# a model folder whose checkpoint is a sharded set: convert takes the set through its index
mkdir hf
cp "$S/sharded/model.safetensors.index.json" "$S"/sharded/model-0000?-of-00002.safetensors hf/
rc=0; "$T" convert hf out.pt || rc=$?
"$T" diff -q hf/model.safetensors.index.json out.pt || fail "out.pt does not hold the set's tensors"
exit "$rc"
