# convert to GGUF of a checkpoint saved in pieces (here a DeepSpeed ZeRO folder) is refused as
# every other convert of one is: consolidate writes it as one file first; nothing written
rc=0; "$T" convert "$S/zero/z1_w1_fp32" "$W/out.gguf" || rc=$?
absent "$W/out.gguf"; no_temporaries "$W"; exit "$rc"
