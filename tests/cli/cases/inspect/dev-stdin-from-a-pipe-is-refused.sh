# inspect /dev/stdin from a pipe: refused as a pipe, never "the file is empty"
cat "$S/tiny_mlp_cuda0.pt" | "$T" inspect /dev/stdin
