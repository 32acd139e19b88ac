# the not-a-checkpoint message quotes the file's first bytes: an empty file has none
: >"$W/empty.pt"
rc=0
"$T" inspect "$W/empty.pt" 2>"$W/err" || rc=$?
cat "$W/err" >&2
if grep -q 'bytes 00 00 00 00' "$W/err"; then
    fail "the message quotes four bytes an empty file does not have"
fi
exit "$rc"
