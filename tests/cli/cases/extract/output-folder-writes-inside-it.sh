# extract IN -o DIR writes DIR/NAME.EXT: NAME the input's, EXT --format's (or the input's own)
mkdir out
"$T" extract -q "$S/lightning_dp_cpu.ckpt" -o out
"$T" extract "$S/lightning_dp_cpu.ckpt" -o out/ --format safetensors --strip-prefix
ls out
