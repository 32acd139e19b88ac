# a checkpoint with a model and an EMA copy: no guess, exit 2, every candidate listed; nothing written
rc=0
"$T" extract "$S/train_ema_cpu.pt" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
no_temporaries "$W"
exit "$rc"
