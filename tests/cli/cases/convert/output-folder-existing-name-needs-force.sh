# convert IN DIR when DIR/NAME.EXT exists: refused without --force, naming it; the file is left as it was
mkdir out
"$T" convert -q "$S/tiny_mlp_cuda0.pt" out/ --format safetensors
before=$(sum out/tiny_mlp_cuda0.safetensors)
rc=0; "$T" convert "$S/tiny_mlp_cuda0.pt" out/ --format safetensors --dtype bfloat16 || rc=$?
unchanged out/tiny_mlp_cuda0.safetensors "$before"
exit "$rc"
