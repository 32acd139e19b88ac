# consolidate of a torch.save file: exit 2, pointing to convert; nothing written
rc=0
"$T" consolidate "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
