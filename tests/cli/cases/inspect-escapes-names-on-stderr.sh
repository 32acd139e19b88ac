# a file whose name, tensor key and global hold the conceal sequence (ESC [8m): every one comes out
# escaped, on stderr as on stdout, so the UNSAFE line stays visible on a terminal
f="$W/$(printf 'e\033[8mvil.pt')"
"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import hostile as H
pkl = H.state_dict(H.dict_of([("\x1b[8mw", H.tensor()), ("obj", H.op_global("__main__", "Evil\x1b[8m") + b")R")]))
open(sys.argv[2], "wb").write(H.torch_zip(pkl, {"0": H.FOUR_FLOATS}))' "$H/../hostile" "$f"
rc=0
"$T" inspect "$f" >"$W/out" 2>"$W/err" || rc=$?
[ "$rc" = 4 ] || fail "inspect exit status $rc"
esc=$(printf '\033')
! grep -q "$esc" "$W/out" "$W/err" || fail "a raw ESC byte reached the terminal"
"$T" inspect "$f"
