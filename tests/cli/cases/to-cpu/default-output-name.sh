# without -o, to-cpu writes NAME.cpu.pt beside NAME.pt
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
"$T" to-cpu -q "$W/m.pt"
ls "$W"
