# to-cpu tiny.pt -o /nonexistent/dir/x.pt names the OUTPUT path, not the input
[ ! -e /nonexistent ] || fail "/nonexistent exists on this machine"
cp "$S/tiny_mlp_cuda0.pt" tiny.pt
"$T" to-cpu tiny.pt -o /nonexistent/dir/x.pt
