# consolidate --from takes the first component of the names: a dotted one is refused when the
# command line is parsed, one line (exit 2) before DIR is read, and nothing is written
rc=0
"$T" consolidate "$S/dcp/ws1_plain" --from model.layers -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
