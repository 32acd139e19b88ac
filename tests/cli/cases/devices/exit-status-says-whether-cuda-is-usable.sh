# devices exits 0 when CUDA is usable and 1 when it is not (no GPU, no driver, built without CUDA),
# and its cuda: line says the same
rc=0
"$T" devices >"$W/out" || rc=$?
case $rc in
0) grep -q '^cuda: usable, ' "$W/out" || fail "exit 0 but: $(grep '^cuda' "$W/out")" ;;
1) grep -q '^cuda: not usable: ' "$W/out" || fail "exit 1 but: $(grep '^cuda' "$W/out")" ;;
*) fail "exit $rc" ;;
esac
rq=0
"$T" devices -q || rq=$?
[ "$rq" -eq "$rc" ] || fail "devices -q exits $rq, devices $rc"
