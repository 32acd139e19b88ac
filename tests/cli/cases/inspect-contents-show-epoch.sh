# a training checkpoint's non-tensor entries are listed under "contents"
"$T" inspect "$C/torch-2.14/train_ckpt_cuda.pt"
