# consolidate of a ZeRO save folder missing a rank's optimizer file: exit 3 naming the step folder
# and the rank; nothing written
cp -r "$S/zero/z2_w3_fp32" "$W/ckpt"
rm "$W/ckpt/global_step3/zero_pp_rank_1_mp_rank_00_optim_states.pt"
rc=0
"$T" consolidate "$W/ckpt" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
no_temporaries "$W"
exit "$rc"
