# the optimizer's param_groups (one level down in a state-holding entry) are shown
"$T" inspect "$S/corpus/torch-2.15/train_ckpt_cuda.pt"
