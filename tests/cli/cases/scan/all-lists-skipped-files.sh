# --all: a line for the files that are not model files too, and for special files (never opened); the
# summary counts each kind of skipped file apart
mkdir m
printf '{"a": 1}\n' >m/config.json
mkfifo m/pipe
cp "$S/tiny_mlp_cuda0.pt" m/
"$T" scan --all m
