# -o DIR when DIR/NAME exists: refused without --force, naming DIR/NAME (the folder itself is never replaced)
mkdir out
cp "$S/tiny_mlp_cuda0.pt" out/
before=$(sum out/tiny_mlp_cuda0.pt)
rc=0; "$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o out/ || rc=$?
unchanged out/tiny_mlp_cuda0.pt "$before"
exit "$rc"
