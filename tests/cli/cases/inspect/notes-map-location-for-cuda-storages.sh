# CUDA-tagged storages get a note on map_location and to-cpu
"$T" inspect "$S/corpus/torch-2.15/train_ckpt_cuda.pt"
