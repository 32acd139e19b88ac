# a raw pickle (protocol 0, plain text) calling posix.system: unsafe, the global named with what it does
printf "cposix\nsystem\n(S'true'\ntR." >job.pkl
"$T" scan -q job.pkl
