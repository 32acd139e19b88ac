# --device 1 is torch.device(1): cuda:1, as every storage of the output says
"$T" to-cuda -q "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" --device 1
"$T" inspect --json "$W/x.pt" | "$PY" -c 'import json,sys; print(sorted({t["device"] for t in json.load(sys.stdin)["tensors"]}))'
