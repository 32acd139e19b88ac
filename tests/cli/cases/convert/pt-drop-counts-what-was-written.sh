# convert of a .pt to a .pt with --drop: the "wrote" line counts the tensors written, not the input's
"$T" convert "$S/optimizer_ckpt_cuda1.pt" "$W/slim.pt" --drop 'optimizer.*'
"$T" inspect "$W/slim.pt" | grep ' tensors on '
