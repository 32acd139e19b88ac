# convert of a DeepSpeed ZeRO save folder: exit 2, pointing to consolidate; nothing written
rc=0
"$T" convert "$S/zero/z2_w3_fp32" "$W/x.safetensors" || rc=$?
absent "$W/x.safetensors"
exit "$rc"
