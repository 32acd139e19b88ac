# convert --ema takes the EMA copy, byte for byte what extract --ema writes
"$T" extract -q "$S/train_ema_cpu.pt" --ema -o "$W/e.safetensors"
"$T" convert "$S/train_ema_cpu.pt" --ema "$W/c.safetensors"
cmp "$W/e.safetensors" "$W/c.safetensors"
