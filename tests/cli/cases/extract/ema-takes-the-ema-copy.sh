# --ema chooses the EMA copy; what stays behind is listed with its tensor bytes
"$T" extract "$S/train_ema_cpu.pt" --ema -o "$W/ema.safetensors"
"$T" inspect "$W/ema.safetensors" | sed -n '/^name/,/^$/p' | grep -vc '^name\|^$'
