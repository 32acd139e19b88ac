# inspect of several files: a report per file (each starting with its file's line), a verdict line
# naming its file (grep verdict says which), a closing count; a file that cannot be read gets its
# error line, and the exit status is the highest of the files' (4 unsafe over 3 bad file over 1)
printf 'not a checkpoint' >"$W/junk.pt"
rc=0
"$T" inspect "$S/tiny_mlp_cuda0.pt" "$W/junk.pt" "$S/corpus/torch-2.15/malicious.pt" >"$W/out" || rc=$?
sed -e "s#$S#\$S#g" "$W/out" | sed -n -e 's/^\(\$S\/[^ ]*: [a-z-]*\),.*/\1/p' -e '/^verdict:/p' -e '/^[0-9]* files: /p'
exit "$rc"
