# the optimizer's param_groups (one level down in a state-holding entry) are shown
"$T" inspect "$C/torch-2.14/train_ckpt_cuda.pt"
