# -o - (standard output) is not written to yet: one clear line, nothing on stdout
"$T" extract "$S/tiny_mlp_cuda0.pt" -o - --format pt
