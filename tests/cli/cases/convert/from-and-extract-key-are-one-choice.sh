# one name for one idea: convert takes --from as --key, extract takes --key as --from; each writes what
# the other spelling writes, byte for byte, and convert's safetensors output is extract's (one code path:
# without --from too, as the training checkpoint's one set of weights is 'model')
"$T" convert -q "$S/optimizer_ckpt_cuda1.pt" --key model "$W/k.safetensors"
"$T" convert -q "$S/optimizer_ckpt_cuda1.pt" --from model "$W/f.safetensors"
cmp "$W/k.safetensors" "$W/f.safetensors"
"$T" extract -q "$S/optimizer_ckpt_cuda1.pt" --from model -o "$W/ef.safetensors"
"$T" extract -q "$S/optimizer_ckpt_cuda1.pt" --key model -o "$W/ek.safetensors"
cmp "$W/ef.safetensors" "$W/ek.safetensors"
cmp "$W/k.safetensors" "$W/ef.safetensors"
"$T" convert -q "$S/optimizer_ckpt_cuda1.pt" "$W/found.safetensors"
cmp "$W/found.safetensors" "$W/ef.safetensors"
"$T" convert "$S/optimizer_ckpt_cuda1.pt" --from nosuch "$W/n.safetensors"
