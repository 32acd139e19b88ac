# a zip with more entries than --max-entries is refused, naming the option that raises the cap
"$T" inspect --max-entries 3 "$S/tiny_mlp_cuda0.pt"
