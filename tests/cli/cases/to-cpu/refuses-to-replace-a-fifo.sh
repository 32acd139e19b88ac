# -o naming a named pipe, --force or not: refused in one line, the pipe left a pipe, nothing written
mkfifo "$W/pipe"
rc=0
"$T" to-cpu "$S/tiny_mlp_cuda0.pt" -o "$W/pipe" --force || rc=$?
[ -p "$W/pipe" ] || fail "the pipe is no longer a pipe"
no_temporaries "$W"
exit "$rc"
