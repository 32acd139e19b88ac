# inspect --json of several files: JSON Lines, one document a line and one per file in order, a file
# that cannot be read as {"file", "error", "exit_status"}; each line is JSON on its own
printf 'not a checkpoint' >"$W/junk.pt"
rc=0
"$T" inspect --json "$S/tiny_mlp_cuda0.pt" "$W/junk.pt" "$S/corpus/torch-2.15/malicious.pt" >"$W/out" || rc=$?
"$PY" -c '
import json, os, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "no newline after the last document"
for line in lines[:-1]:
    d = json.loads(line)
    print(os.path.basename(d["file"]), d.get("verdict") or "error %d: %s" % (d["exit_status"], d["error"]))
' "$W/out"
exit "$rc"
