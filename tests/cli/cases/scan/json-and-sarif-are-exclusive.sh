# --json and --sarif each make the whole output: both at once is a usage error
"$T" scan --json --sarif "$S/tiny_mlp_cuda0.pt"
