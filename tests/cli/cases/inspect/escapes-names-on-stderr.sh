# a file whose name, tensor key and global hold the conceal sequence (ESC [8m): every one comes out
# escaped, on stderr (the UNSAFE line of -q and --json) as on stdout (the report, its verdict line), so
# escaped, on stderr (the UNSAFE line) as on stdout (the report, its verdict line), so
f="$W/$(printf 'e\033[8mvil.pt')"
"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import hostile as H
pkl = H.state_dict(H.dict_of([("\x1b[8mw", H.tensor()), ("obj", H.op_global("__main__", "Evil\x1b[8m") + b")R")]))
open(sys.argv[2], "wb").write(H.torch_zip(pkl, {"0": H.FOUR_FLOATS}))' "$H/../hostile" "$f"
rc=0
"$T" inspect "$f" >"$W/out" 2>"$W/err" || rc=$?
[ "$rc" = 4 ] || fail "inspect exit status $rc"
rc=0
"$T" inspect -q "$f" >"$W/qout" 2>"$W/qerr" || rc=$?
[ "$rc" = 4 ] || fail "inspect -q exit status $rc"
grep -qF 'e\x1b[8mvil.pt: UNSAFE: loading it needs weights_only=False for globals outside torch'"'"'s allowlist: __main__.Evil\x1b[8m' "$W/qerr" ||
    fail "inspect -q gives no escaped UNSAFE line"
esc=$(printf '\033')
! grep -q "$esc" "$W/out" "$W/err" "$W/qout" "$W/qerr" || fail "a raw ESC byte reached the terminal"
"$T" inspect "$f"
