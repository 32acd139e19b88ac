# a folder of safe checkpoints and a README: a line per model file, the README counted as skipped, exit 0
mkdir m
cp "$S/tiny_mlp_cuda0.pt" "$S/legacy_cuda0.pt" m/
printf '# notes\n' >m/README.md
"$T" scan m
