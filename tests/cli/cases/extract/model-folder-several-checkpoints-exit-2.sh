# extract of a folder holding model.safetensors and pytorch_model.bin: exit 2, both listed, nothing written
mkdir hf
cp "$S/tiny_mlp_cuda0.pt" hf/pytorch_model.bin
"$T" convert -q hf/pytorch_model.bin hf/model.safetensors
rc=0; "$T" extract hf -o w.safetensors || rc=$?
absent w.safetensors
exit "$rc"
