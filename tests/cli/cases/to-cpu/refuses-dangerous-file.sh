# a file naming a dangerous global is not rewritten: exit 4, no OUT, no temporary
rc=0
"$T" to-cpu "$S/corpus/torch-2.15/malicious.pt" -o "$W/mal.pt" || rc=$?
absent "$W/mal.pt"
no_temporaries "$W"
exit "$rc"
