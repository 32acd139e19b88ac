# to-cpu of a model folder: its checkpoint is rewritten, the output named after that file
mkdir hf
cp "$S/tiny_mlp_cuda0.pt" hf/pytorch_model.bin
rc=0; "$T" to-cpu hf || rc=$?
[ -s hf/pytorch_model.cpu.bin ] || fail "hf/pytorch_model.cpu.bin not written"
exit "$rc"
