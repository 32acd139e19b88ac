# one name for one idea: convert takes --from as --key, extract takes --key as --from; each writes what
# the other spelling writes, byte for byte
"$T" convert -q "$S/optimizer_ckpt_cuda1.pt" --key model "$W/k.safetensors"
"$T" convert -q "$S/optimizer_ckpt_cuda1.pt" --from model "$W/f.safetensors"
cmp "$W/k.safetensors" "$W/f.safetensors"
"$T" extract -q "$S/optimizer_ckpt_cuda1.pt" --from model -o "$W/ef.safetensors"
"$T" extract -q "$S/optimizer_ckpt_cuda1.pt" --key model -o "$W/ek.safetensors"
cmp "$W/ef.safetensors" "$W/ek.safetensors"
"$T" convert "$S/optimizer_ckpt_cuda1.pt" --from nosuch "$W/n.safetensors"
