# consolidate --tag of an older step and --exclude-frozen: the step asked for, without the frozen
# parameters (-v says how many tensors, the tied name counted apart)
"$T" consolidate -v "$S/zero/z2_w2_fp32_tags" --tag global_step2 --exclude-frozen -o "$W/x.pt"
