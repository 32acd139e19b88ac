# the weights paragraph: a training checkpoint, its share of bytes, optimizer state, the shared key prefix
"$T" inspect "$S/lightning_dp_cpu.ckpt" | grep '^weights:'
