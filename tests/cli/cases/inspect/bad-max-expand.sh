# a malformed --max-expand is a usage error (exit 2), and nothing parsed before it is leaked
"$T" inspect "$S/tiny_mlp_cuda0.pt" --max-expand 0 --safe-globals argparse.Namespace
