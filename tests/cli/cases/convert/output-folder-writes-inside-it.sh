# convert IN DIR (an existing folder) writes DIR/NAME.EXT, NAME the input's, EXT the format --format
# gives (or the input's own: a torch name keeps its extension), as to-cpu -o DIR and cp do
mkdir out
"$T" convert -q "$S/tiny_mlp_cuda0.pt" out
"$T" convert -q "$S/lightning_dp_cpu.ckpt" out/ --format safetensors
"$T" convert "$S/tiny_mlp_cuda0.pt" out --format safetensors
ls out
