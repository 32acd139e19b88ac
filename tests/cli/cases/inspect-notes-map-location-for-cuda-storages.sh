# CUDA-tagged storages get a note on map_location and to-cpu
"$T" inspect "$C/torch-2.14/train_ckpt_cuda.pt"
