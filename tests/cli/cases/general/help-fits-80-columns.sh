# --help of tensorctl and of every command, not on a terminal: wrapped between words within 80
# columns, no line ending with a space, and every command listed with what it does
"$T" --help >"$W/all"
for c in inspect scan to-cpu to-cuda convert extract consolidate diff devices; do
    "$T" "$c" --help >>"$W/all"
    grep -q "^  $c  *[a-z]" "$W/all" || fail "tensorctl --help does not say what $c does"
done
! awk 'length > 80 { print FILENAME ": " $0; bad = 1 } END { exit !bad }' "$W/all" >&2 || fail "a line over 80 columns"
! grep -n ' $' "$W/all" >&2 || fail "a line ends with a space"
! grep -n '[a-z]-$' "$W/all" | grep -v -- '--[a-z-]*-$' >&2 || fail "a word broken at a line's end"
