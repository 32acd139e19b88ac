# without -o, to-cuda --device cuda:1 writes NAME.cuda1.pt beside NAME.pt
cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
"$T" to-cuda -q "$W/m.pt" --device cuda:1
ls "$W"
