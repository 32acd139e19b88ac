# a training checkpoint with two sets of weights (model and its EMA copy): exit 2 listing them, as extract
# does; --from KEY or --ema chooses, --from . keeps every tensor; nothing written
rc=0; "$T" convert "$S/train_ema_cpu.pt" "$W/w.safetensors" || rc=$?
absent "$W/w.safetensors"
exit "$rc"
