# test over intact files of three formats: one OK line each saying what was checked; a format without checksums says so
"$T" test "$S/tiny_mlp_cuda0.pt" "$S/legacy_cuda0.pt" "$S/sharded/pytorch_model.bin.index.json"
