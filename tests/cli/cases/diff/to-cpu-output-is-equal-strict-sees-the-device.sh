# a to-cpu output has the same tensors (diff -q: exit 0, nothing printed); --strict counts the
# device tag, so the same pair differs (exit 1)
"$T" to-cpu -q "$S/tiny_mlp_cuda0.pt" -o "$W/m.cpu.pt"
"$T" diff -q "$S/tiny_mlp_cuda0.pt" "$W/m.cpu.pt" || fail "diff -q of a file and its to-cpu output: exit $?"
"$T" diff -q --strict "$S/tiny_mlp_cuda0.pt" "$W/m.cpu.pt"
