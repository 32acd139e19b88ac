# after --drop, the "wrote" line counts the output's tensors, storages and bytes, and says how many
# were left out (optimizer_ckpt_cuda1.pt: 4 model tensors and best_loss kept, 12 optimizer tensors
# dropped)
"$T" to-cpu "$S/optimizer_ckpt_cuda1.pt" -o "$W/slim.pt" --drop 'optimizer.*'
"$T" inspect "$W/slim.pt" | grep ' tensors on '
