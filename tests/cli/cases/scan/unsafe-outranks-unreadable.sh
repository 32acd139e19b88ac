# unsafe and unreadable files together: exit 4
head -c 600 "$S/tiny_mlp_cuda0.pt" >cut.pt
printf "cposix\nsystem\n(S'true'\ntR." >job.pkl
"$T" scan -q cut.pt job.pkl
