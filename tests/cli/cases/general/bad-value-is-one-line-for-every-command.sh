# A value is checked by the row's kind when the command line is parsed, so the same bad value
# of a shared option is the same one line (exit 2) whichever command takes it, before any FILE
# is opened; the word options name their words.
for cmd in inspect scan test to-cpu convert diff; do
    rc=0
    "$T" $cmd --max-depth 1k "$S/tiny_mlp_cuda0.pt" "$W/x.safetensors" 2>"$W/$cmd.err" || rc=$?
    [ "$rc" -eq 2 ] || fail "$cmd --max-depth 1k exited $rc"
    cmp "$W/inspect.err" "$W/$cmd.err" || fail "$cmd said another line than inspect"
done
absent "$W/x.safetensors"
cat "$W/inspect.err" >&2
"$T" convert --format pickle "$S/tiny_mlp_cuda0.pt" "$W/x.pt" || true
"$T" inspect --names gguf "$S/tiny_mlp_cuda0.pt" || true
"$T" to-cpu --engine gpu "$S/tiny_mlp_cuda0.pt" || true
"$T" scan --jobs 1025 "$S/tiny_mlp_cuda0.pt"
