# a unique prefix of a long option (--js for --json, --has for --hash) is that option, as getopt_long takes it
"$T" inspect --js --has "$S/tiny_mlp_cuda0.pt" >"$W/j"
"$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["format"], len(d["tensors"]), all(len(t["sha256"]) == 64 for t in d["tensors"]))' "$W/j"
