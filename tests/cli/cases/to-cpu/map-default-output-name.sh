# without -o, to-cpu --map writes NAME.mapped.pt (not NAME.cpu.pt: --map moves only the storages it
# names, here every cuda:1 one to cuda:0)
cp "$S/optimizer_ckpt_cuda1.pt" "$W/ckpt.pt"
"$T" to-cpu -q "$W/ckpt.pt" --map cuda:1=cuda:0
ls "$W"
"$T" inspect "$W/ckpt.mapped.pt" | grep '^bytes per device'
