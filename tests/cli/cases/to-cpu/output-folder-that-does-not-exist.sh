# -o NAME/ (a folder by its slash) that does not exist: refused before reading, nothing made
rc=0; "$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o new/ || rc=$?
absent new
exit "$rc"
