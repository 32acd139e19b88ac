# consolidate of a BF16_Optimizer checkpoint (bf16 with fp32 gradient accumulation), which DeepSpeed's
# converter refuses: refused too, saying so; nothing written
rc=0
"$T" consolidate "$S/zero/z1_w2_bf16_fp32accum" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
