#!/usr/bin/env python3
"""GGUF files against their references (X.ref.json, X.ref.npz beside each X.gguf,
made by gguf-py; bad/EXPECT.json for the broken ones):

  - inspect --json --hash agrees with the reference: version, byte order,
    alignment, data offset, counts, every KV (key, type, element type,
    value: integers exactly, FLOAT32 as float32, nested arrays whole), every
    tensor (name, ggml type and id, GGUF dims, torch shape, element count,
    bytes, offsets, SHA-256 of its stored bytes);
  - convert to safetensors gives every tensor's values bit for bit as the
    npz holds them (gguf-py's dequantised float32, or native values), and
    diff finds the GGUF equal to that output;
  - every file of bad/ is refused: exit 3, one line naming the file, and a
    convert of it writes nothing.

Usage: check_gguf.py TENSORCTL OUTDIR DIR...   (a DIR that does not exist is
skipped with a note; all absent: exit 77). Needs numpy."""
import glob
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable here", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from st_read import read_raw  # noqa: E402

tc, out, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(out, exist_ok=True)
fails = []
checked = 0
ST_NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8, "I16": np.int16, "I32": np.int32,
         "I64": np.int64, "BF16": np.uint16}


def fail(msg):
    fails.append(msg)
    print("FAIL " + msg)


def f32(x):
    if isinstance(x, dict):  # the shared corpus writes floats as {"float", "hex"}
        x = x["float"]
    if isinstance(x, str):
        return np.float32(float(x))
    return np.float32(x)


def same_value(kind, want, got):
    """want (the reference) and got (inspect's JSON) hold the same value of GGUF type kind (the
    element type for arrays); lists element by element, arrays of arrays at any depth."""
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(same_value(kind, w, g)
                                                                       for w, g in zip(want, got))
    if kind == "FLOAT32":
        a, b = f32(want), f32(got)
        return a.tobytes() == b.tobytes() or (np.isnan(a) and np.isnan(b))
    if kind == "FLOAT64":
        a = float(want["float"] if isinstance(want, dict) else want)
        b = float(got)
        return struct.pack("<d", a) == struct.pack("<d", b) or (a != a and b != b)
    return want == got and type(want) is type(got)


def inspect(path):
    p = subprocess.run([tc, "inspect", "--json", "--hash", path], capture_output=True, text=True)
    if p.returncode not in (0, 4):
        fail(f"{path}: inspect exit {p.returncode}: {p.stderr.strip()}")
        return None
    j = json.loads(p.stdout)
    if (p.returncode == 4) != bool(j["hazards"]):
        fail(f"{path}: exit {p.returncode} but hazards {j['hazards']}")
    return j


def check_file(path, ref):
    global checked
    j = inspect(path)
    if j is None:
        return
    g = j.get("gguf")
    if g is None:
        fail(f"{path}: no gguf object in inspect --json")
        return
    for k in ("version", "endianness", "alignment", "data_offset", "tensor_count", "kv_count"):
        if g.get(k) != ref[k]:
            fail(f"{path}: {k} is {g.get(k)!r}, reference {ref[k]!r}")
    kv = {e["key"]: e for e in g["kv"]}
    if [e["key"] for e in g["kv"]] != [e["key"] for e in ref["kv"]]:
        fail(f"{path}: keys {[e['key'] for e in g['kv']]} != reference {[e['key'] for e in ref['kv']]}")
    for e in ref["kv"]:
        m = kv.get(e["key"])
        if m is None:
            continue
        if m["type"] != e["type"] or m.get("element_type") != e.get("element_type"):
            fail(f"{path}: key {e['key']}: type {m['type']}/{m.get('element_type')} != {e['type']}/{e.get('element_type')}")
        elif bool(m.get("nested")) != bool(e.get("nested")):
            fail(f"{path}: key {e['key']}: nested {m.get('nested')} != {e.get('nested')}")
        elif not same_value(e.get("element_type") or e["type"], e["value"], m["value"]):
            fail(f"{path}: key {e['key']}: value {str(m['value'])[:80]} != reference {str(e['value'])[:80]}")
    tensors = {t["name"]: t for t in j["tensors"]}
    split_first = ref["tensor_count"] < len(j["tensors"])  # the first file of a split set opens the whole set
    if not split_first and [t["name"] for t in j["tensors"]] != [t["name"] for t in ref["tensors"]]:
        fail(f"{path}: tensors {list(tensors)} != reference {[t['name'] for t in ref['tensors']]}")
    for t in ref["tensors"]:
        m = tensors.get(t["name"])
        if m is None:
            fail(f"{path}: tensor {t['name']} missing")
            continue
        q = m.get("gguf", {})
        got = {"ggml_type": q.get("ggml_type"), "ggml_type_id": q.get("ggml_type_id"), "ne": q.get("ne"),
               "shape_torch": m["shape"], "n_elements": int(np.prod(m["shape"])) if m["shape"] else 1,
               "n_bytes": q.get("n_bytes"), "offset": q.get("offset"), "file_offset": q.get("file_offset"),
               "sha256": q.get("sha256")}
        for k, v in got.items():
            if v != t[k]:
                fail(f"{path}: tensor {t['name']}: {k} {v!r} != reference {t[k]!r}")
    values(path, ref, split_first, j["hazards"])
    checked += 1


def values(path, ref, split_first, hazards):
    npz_path = path[:-5] + ".ref.npz"
    if not ref["tensors"] or not os.path.exists(npz_path):
        return
    z = np.load(npz_path)
    st = os.path.join(out, os.path.basename(path)[:-5] + ".safetensors")
    cmd = [tc, "convert", "-q", "--force", path, st] + (["--allow-unsafe"] if hazards else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        fail(f"{path}: convert exit {p.returncode}: {p.stderr.strip()}")
        return
    p = subprocess.run([tc, "diff", "-q", path, st], capture_output=True, text=True)
    if p.returncode:  # diff reads both sides' values: the GGUF's decoded, the output's as written
        fail(f"{path}: diff against its own safetensors output: exit {p.returncode} {p.stdout.strip()} {p.stderr.strip()}")
    header, data = read_raw(st)
    for t in ref["tensors"]:
        name = t["name"]
        if name not in z.files:
            continue
        e = header.get(name)
        if e is None:
            fail(f"{path}: {name} not in the safetensors output")
            continue
        a, b = e["data_offsets"]
        got = np.frombuffer(data[a:b], dtype=ST_NP[e["dtype"]]).reshape(e["shape"])
        want = z[name]
        if e["dtype"] == "BF16":
            got = (got.astype(np.uint32) << 16).view(np.float32)
        if want.dtype in (np.float32, np.float16):
            ok = got.astype(np.float32).tobytes() == want.astype(np.float32).tobytes()
        else:
            ok = got.dtype == want.dtype and got.tobytes() == want.tobytes()
        if not ok or list(got.shape) != list(want.shape):
            fail(f"{path}: {name}: values differ from the reference ({e['dtype']} {e['shape']} vs {want.dtype} "
                 f"{list(want.shape)})")


def check_bad(d):
    global checked
    exp_path = os.path.join(d, "bad", "EXPECT.json")
    if not os.path.exists(exp_path):
        return
    expect = json.load(open(exp_path))
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "bad", "*.gguf")))
    if sorted(expect) != files:
        fail(f"{d}/bad: EXPECT.json lists {sorted(expect)}, the folder holds {files}")
    for name in files:
        path = os.path.join(d, "bad", name)
        p = subprocess.run([tc, "inspect", path], capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        if p.returncode != 3 or len(lines) != 1 or not lines[0].startswith(f"tensorctl: {path}: "):
            fail(f"{path}: want exit 3 and one line naming it; got {p.returncode}: {p.stderr.strip()!r} "
                 f"(why: {expect.get(name, {}).get('why')})")
        dst = os.path.join(out, "bad-" + name + ".safetensors")
        before = set(os.listdir(out))
        p = subprocess.run([tc, "convert", "--allow-unsafe", path, dst], capture_output=True, text=True)
        after = set(os.listdir(out))
        if p.returncode == 0 or after != before:
            fail(f"{path}: convert exit {p.returncode}, left {sorted(after - before)}")
        checked += 1


present = [d for d in dirs if os.path.isdir(d)]
for d in dirs:
    if d not in present:
        print(f"note: {d} is not here; its files are not checked")
if not present:
    print("SKIP: none of the folders is here")
    sys.exit(77)
for d in present:
    for path in sorted(glob.glob(os.path.join(d, "*.gguf"))):
        rp = path[:-5] + ".ref.json"
        if os.path.exists(rp):
            check_file(path, json.load(open(rp)))
    check_bad(d)
print(f"{checked} files checked, {len(fails)} failures")
sys.exit(1 if fails else 0)
