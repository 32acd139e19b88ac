# --safe-globals is checked when the command line is parsed, the same for every command that takes
# it: a name torch never admits is one line (exit 2) naming the value, and the name when the value
# lists several, before any FILE is read; nothing is written
for cmd in inspect scan to-cpu to-cuda convert extract consolidate diff; do
    rc=0
    "$T" $cmd --safe-globals posix.system "$S/tiny_mlp_cuda0.pt" "$W/x.safetensors" 2>"$W/$cmd.err" || rc=$?
    [ "$rc" -eq 2 ] || fail "$cmd --safe-globals posix.system exited $rc"
    cmp "$W/inspect.err" "$W/$cmd.err" || fail "$cmd said another line than inspect"
done
absent "$W/x.safetensors"
cat "$W/inspect.err" >&2
rc=0
"$T" convert --safe-globals mymod.Config,,os.system "$S/tiny_mlp_cuda0.pt" "$W/x.safetensors" || rc=$?
absent "$W/x.safetensors"
exit "$rc"
