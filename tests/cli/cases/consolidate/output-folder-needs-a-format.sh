# consolidate DIR -o OUTDIR without --format: the checkpoint folder's name gives no extension, so the file
# cannot be named; exit 2 saying so, nothing written
mkdir out
rc=0; "$T" consolidate "$S/dcp/ws2_sharded" -o out || rc=$?
[ -z "$(ls -A out)" ] || fail "out holds $(ls out)"
exit "$rc"
