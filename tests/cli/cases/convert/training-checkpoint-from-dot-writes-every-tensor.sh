# --from . (extract's "the whole file") keeps every tensor of a training checkpoint, the optimizer's too,
# under their full names; what is no tensor is listed as left behind
"$T" convert "$S/optimizer_ckpt_cuda1.pt" "$W/all.safetensors" --from .
"$T" inspect --json "$W/all.safetensors" | "$PY" -c "import json, sys; print(len(json.load(sys.stdin)[\"tensors\"]))"
