# a truncated checkpoint beside a safe one: unreadable with its driver's reason, exit 3
head -c 600 "$S/tiny_mlp_cuda0.pt" >cut.pt
cp "$S/tiny_mlp_cuda0.pt" whole.pt
"$T" scan -q cut.pt whole.pt
