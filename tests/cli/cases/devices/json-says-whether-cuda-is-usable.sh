# devices --json: one JSON object on one line, with the exit status devices gives without it (0 when CUDA
# is usable, 1 when not); without a usable GPU it says so plainly (usable false, why, no devices)
rc=0
"$T" devices >"$W/text" || rc=$?
rj=0
"$T" devices --json >"$W/json" || rj=$?
[ "$rj" -eq "$rc" ] || fail "devices --json exits $rj, devices $rc"
"$PY" - "$W/json" "$rc" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n") and text.count("\n") == 1, "not one line: %r" % text
d = json.loads(text)
assert set(d) == {"cpu", "cuda", "devices"} and d["cpu"]["cast_path"], d
cu = d["cuda"]
if sys.argv[2] == "0":
    assert cu["usable"] and cu["why"] is None and cu["count"] == len(d["devices"]) > 0, d
    for x in d["devices"]:
        assert set(x) == {"index", "name", "total_bytes", "free_bytes", "compute_capability"}, x
else:
    assert cu["usable"] is False and cu["why"] and d["devices"] == [] and cu["count"] == 0, d
PY
"$T" devices --json -q
