# --tag names a step folder of DIR: a path is refused when the command line is parsed, one line
# (exit 2) before DIR is read, and nothing is written
rc=0
"$T" consolidate "$S/zero/z2_w2_fp32_tags" --tag ../z2_w2_fp32_tags -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
