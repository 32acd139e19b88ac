# a storage whose persistent id lies only in an object the pickle discards (POP): torch.load reads it and
# drops it; inspect says so (and --json marks it unreached), to-cpu leaves it out and says so, and what it
# writes holds the one storage the object reaches
"$PY" - "$W/in.pt" <<'PYEOF'
import sys, zipfile
def s(t):
    b = t.encode()
    return b"X" + len(b).to_bytes(4, "little") + b
def pid(key):
    return b"(" + s("storage") + b"ctorch\nFloatStorage\n" + s(key) + s("cuda:0") + b"K\x02tQ"
od = b"ccollections\nOrderedDict\n)R"
pkl = (b"\x80\x02" + pid("0") + b"0" + od + s("w") + b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid("1") +
       b"K\x00K\x02\x85K\x01\x85\x89" + od + b"tRs.")
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("in/data.pkl", pkl)
    z.writestr("in/byteorder", "little")
    z.writestr("in/data/0", b"\x00" * 8)
    z.writestr("in/data/1", b"\x01" * 8)
    z.writestr("in/version", "3\n")
PYEOF
"$T" inspect "$W/in.pt" | grep -E '^(w |[0-9]+ tensors? on|note: 1 storage)'
"$T" inspect --json "$W/in.pt" | "$PY" -c 'import json, sys; print([s.get("unreached", False) for s in json.load(sys.stdin)["storages"]])'
"$T" to-cpu "$W/in.pt" -o "$W/out.pt"
"$T" inspect "$W/out.pt" | grep -E '^(w |[0-9]+ tensors? on)'
