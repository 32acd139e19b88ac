# convert of a training checkpoint to safetensors writes its weights, as extract picks them (model, named
# relative to it), says which entry it took and lists what stayed behind (the optimizer's 12 tensors among it);
# tests/cli/check_convert_weights.py judges the file with torch and safetensors
"$T" convert "$S/optimizer_ckpt_cuda1.pt" "$W/w.safetensors"
