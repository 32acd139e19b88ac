# diff of a file and its to-cpu copy: the values are equal and only the saved devices differ, said in
# one line for every tensor (not one line per tensor); -v lists them
"$T" to-cpu -q "$S/tiny_mlp_cuda0.pt" -o "$W/cpu.pt"
"$T" diff -v "$S/tiny_mlp_cuda0.pt" "$W/cpu.pt" | grep -c '^= ' | sed 's/^/with -v: /'
"$T" diff "$S/tiny_mlp_cuda0.pt" "$W/cpu.pt"
