# --part's I/N is checked when the command line is parsed, the same for every command that
# writes sets, before its input is read: no output appears (a to-cpu of one file never reads it)
rc=0
"$T" to-cpu --part 0/3 "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" 2>"$W/to-cpu.err" || rc=$?
[ "$rc" -eq 2 ] || fail "to-cpu --part 0/3 exited $rc"
absent "$W/x.pt"
cat "$W/to-cpu.err" >&2
"$T" consolidate --part 2 "$S/tiny_mlp_cuda0.pt" -o "$W/set/" || true
absent "$W/set"
"$T" convert --part 3/2 "$S/tiny_mlp_cuda0.pt" "$W/set/"
