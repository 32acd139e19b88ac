# a truncated checkpoint: one line naming the file, exit 3, nothing written
head -c 3000 "$S/lightning_dp_cpu.ckpt" > "$W/cut.ckpt"
rc=0
"$T" extract "$W/cut.ckpt" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
