# a Hugging Face model folder is an input: the one checkpoint inside is read, and said on stderr
mkdir hf
cp "$S/tiny_mlp_cuda0.pt" hf/pytorch_model.bin
echo "{}" >hf/config.json
"$T" inspect hf/
