# diff --json: the report as one JSON document on one line (as inspect --json prints one per file), its
# summary and a record per tensor, and the exit status in it; a diff that cannot be made gives
# {"a": {"path"}, "b": {"path"}, "error", "exit_status"} on stdout as well as the error line
"$T" to-cpu -q "$S/tiny_mlp_cuda0.pt" -o cpu.pt
"$T" to-cpu -q "$S/tiny_mlp_cuda0.pt" --dtype bfloat16 -o bf16.pt
show() {
    "$PY" -c '
import json, os, sys
text = sys.stdin.read()
assert text.endswith("\n") and text.count("\n") == 1, "not one line: %r" % text[:200]
d = json.loads(text)
if "error" in d:
    print(os.path.basename(d["a"]["path"]), d["b"]["path"], "error %d: %s" % (d["exit_status"], d["error"]))
else:
    print(d["exit_status"], d["equal"], json.dumps(d["summary"], sort_keys=True),
          " ".join("%s=%s" % (t["name"], t["status"]) for t in d["tensors"]))
'
}
rc=0; "$T" diff --json cpu.pt bf16.pt >out.json || rc=$?
[ "$rc" -eq 1 ] || fail "diff exits $rc"
show <out.json
"$T" diff --json "$S/tiny_mlp_cuda0.pt" cpu.pt | show
rc=0; "$T" diff --json cpu.pt nosuch.pt >fail.json || rc=$?
show <fail.json
exit "$rc"
