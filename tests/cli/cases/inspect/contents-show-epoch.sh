# a training checkpoint's non-tensor entries are listed under "contents"
"$T" inspect "$S/corpus/torch-2.15/train_ckpt_cuda.pt"
