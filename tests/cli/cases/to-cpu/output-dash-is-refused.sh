# to-cpu -o - : standard output is not written to; one line saying a seekable file is needed, nothing named "-"
rc=0; "$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o - || rc=$?
absent ./-
exit "$rc"
