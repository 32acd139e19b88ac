# inspect of a DeepSpeed ZeRO save folder: stage, ranks, dtype; the consolidated state_dict (parameters
# gathered from the ranks' pieces, frozen ones, tied names); what else the files hold; the verdict of
# DeepSpeed's own classes, distinct from torch's weights_only
"$T" inspect "$S/zero/z2_w3_fp32"
