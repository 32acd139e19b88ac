# consolidate --tag naming no step folder: exit 2; nothing written
rc=0
"$T" consolidate "$S/zero/z2_w2_fp32_tags" --tag global_step9 -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
