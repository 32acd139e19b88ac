# --json: JSON Lines, one object per file in walk order, then the summary object
printf "cposix\nsystem\n(S'true'\ntR." >job.pkl
cp "$S/tiny_mlp_cuda0.pt" model.pt
"$T" scan --json --jobs 2 job.pkl model.pt
