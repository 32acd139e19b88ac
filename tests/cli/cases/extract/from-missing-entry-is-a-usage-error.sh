# --from naming nothing: exit 2, nothing written
rc=0
"$T" extract "$S/lightning_dp_cpu.ckpt" --from nosuch -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
