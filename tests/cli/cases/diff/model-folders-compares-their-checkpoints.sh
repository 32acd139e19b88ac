# diff takes model folders on both sides, saying which file of each it reads
mkdir a b
cp "$S/tiny_mlp_cuda0.pt" a/pytorch_model.bin
cp "$S/tiny_mlp_cuda0.pt" b/pytorch_model.bin
"$T" diff a b >report.txt
