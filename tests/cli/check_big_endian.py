#!/usr/bin/env python3
"""Big-endian checkpoints (torch.save on s390x and other big-endian machines writes a byteorder
record 'big'): inspect, diff, to-cpu, a bfloat16 cast and convert, judged against the same
checkpoint written little-endian.

usage: check_big_endian.py TENSORCTL OUTDIR      (run under a python with torch)

The files are made here byte by byte with tests/hostile's builders, so that torch 1.13, which
ignores the byteorder record, can judge too: one pickle (a state_dict of float32, float64,
float16, bfloat16, int64, int32, int16, uint8, bool and complex64 tensors, two of them views of
one storage, one of 1.2 MB, storages tagged cuda:0) over the same numbers, laid out little-endian
(little.pt), big-endian (big.pt) and big-endian with every record deflated (big-deflated.pt).
For each big file:
  torch     where torch swaps bytes on load (2.1 and later) it loads the file equal to little.pt
            bit for bit: what is made here is what torch takes for big-endian;
  inspect   `inspect --json --hash` lists little.pt's tensors with the same SHA-256 (the hash is
            of the numbers, so the bytes were swapped), and its byteorder record; `inspect` notes
            that torch 1.x reads such a file wrong;
  diff      `tensorctl diff FILE little.pt` finds every tensor equal (exit 0);
  to-cpu    the output, little-endian, loads in torch equal to little.pt with every storage on the
            cpu (tests/torch_verify.py verify_output);
  bfloat16  `to-cpu --dtype bfloat16` equals little.pt cast by torch;
  convert   the .safetensors output holds little.pt's tensors bit for bit;
and a byteorder record that is neither 'little' nor 'big' is refused with one error line, as
torch refuses it. Exit 0, 1 on a failure, 77 when torch cannot be imported.
"""
import json
import math
import os
import random
import struct
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "hostile"))
sys.path.insert(0, HERE)
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch_verify  # noqa: E402
from check_py2 import check_safetensors  # noqa: E402
from hostile import FALSE, PROTO, STOP, dict_of, op_global, op_int, op_tuple, storage_pid, torch_zip  # noqa: E402

# name, storage class, struct code of one number (a component, for complex), numbers per element,
# shape, and the storage key and offset when the tensor is a view of another's storage
TENSORS = [
    ("w32", "FloatStorage", "f", 1, (3, 4), None),
    ("w32.view", "FloatStorage", "f", 1, (2, 4), ("w32", 4)),
    ("w64", "DoubleStorage", "d", 1, (5,), None),
    ("w16", "HalfStorage", "e", 1, (2, 3), None),
    ("wbf16", "BFloat16Storage", "bf16", 1, (7,), None),
    ("i64", "LongStorage", "q", 1, (4,), None),
    ("i32", "IntStorage", "i", 1, (2, 2), None),
    ("i16", "ShortStorage", "h", 1, (3,), None),
    ("u8", "ByteStorage", "B", 1, (5,), None),
    ("mask", "BoolStorage", "?", 1, (6,), None),
    ("z64", "ComplexFloatStorage", "f", 2, (3,), None),
    ("big", "FloatStorage", "f", 1, (300000,), None),
]


def numbers(code, n, rng):
    if code in "fd":
        return [rng.uniform(-3, 3) for _ in range(n)]
    if code == "e":
        return [rng.uniform(-60000, 60000) for _ in range(n)]
    if code == "bf16":
        return [rng.getrandbits(16) & 0x7f7f for _ in range(n)]  # finite bfloat16 bit patterns
    if code == "?":
        return [rng.random() < 0.5 for _ in range(n)]
    bits = {"q": 63, "i": 31, "h": 15, "B": 8}[code]
    lo = 0 if code == "B" else -(1 << bits)
    return [rng.randint(lo, (1 << bits) - 1) for _ in range(n)]


def pack(order, code, vals):
    return struct.pack(order + ("H" if code == "bf16" else code) * len(vals), *vals)


def make(folder):
    """little.pt, big.pt, big-deflated.pt and middle.pt (byteorder 'middle') in folder."""
    rng = random.Random(2024)
    pairs, data = [], {}
    for name, stype, code, per, shape, view in TENSORS:
        numel = 1
        for x in shape:
            numel *= x
        stride = tuple(int(math.prod(shape[i + 1:])) for i in range(len(shape)))
        if view:
            key, off = view
            base = next(t for t in TENSORS if t[0] == key)
            total = int(math.prod(base[4]))
        else:
            key, off, total = name, 0, numel
            vals = numbers(code, total * per, rng)
            data[key] = {o: pack(o, code, vals) for o in "<>"}
        pid = storage_pid(key, total, stype, loc="cuda:0")
        hooks = op_global("collections", "OrderedDict") + b")R"
        args = [pid, op_int(off), op_tuple([op_int(x) for x in shape]), op_tuple([op_int(x) for x in stride]),
                FALSE, hooks]
        pairs.append((name, op_global("torch._utils", "_rebuild_tensor_v2") + op_tuple(args) + b"R"))
    pkl = PROTO + dict_of(pairs) + STOP
    files = {}
    for label, order, method, mark in (("little", "<", zipfile.ZIP_STORED, "little"),
                                       ("big", ">", zipfile.ZIP_STORED, "big"),
                                       ("big-deflated", ">", zipfile.ZIP_DEFLATED, "big"),
                                       ("middle", ">", zipfile.ZIP_STORED, "middle")):
        path = os.path.join(folder, label + ".pt")
        with open(path, "wb") as f:
            f.write(torch_zip(pkl, {k: v[order] for k, v in data.items()}, archive=label, method=method,
                              byteorder=mark))
        files[label] = path
    return files


def torch_swaps():
    """True when this torch reads the byteorder record (2.1 and later: UntypedStorage.byteswap)."""
    return hasattr(torch.UntypedStorage, "byteswap") if hasattr(torch, "UntypedStorage") else False


def hashes(tool, path):
    rc, out, err = run(tool, "inspect", "--json", "--hash", path)
    if rc != 0:
        return None, "exit %d: %s" % (rc, err.strip())
    j = json.loads(out)
    return j, {t["name"]: (t["dtype"], t["shape"], t["stride"], t["storage_offset"], t["sha256"])
               for t in j["tensors"]}


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    out = out_dir(sys.argv[2], torch)
    files = make(out)
    little = files["little"]
    rep = Report()
    tv = "torch " + torch.__version__
    _, want = hashes(tool, little)
    rep.check("little.pt inspect", [] if isinstance(want, dict) else [want])
    for label in ("big", "big-deflated"):
        path = files[label]
        if torch_swaps():
            got = torch_verify.load_checkpoint(path).obj
            ref = torch_verify.load_checkpoint(little).obj
            problems = ["%s differs" % k for k in ref
                        if torch_verify.tensor_bytes(got[k]) != torch_verify.tensor_bytes(ref[k])]
            rep.check("%s: %s loads it equal to little.pt" % (label, tv), problems)
        j, got = hashes(tool, path)
        if j is None:
            rep.check("%s inspect" % label, [got])
        else:
            problems = ["%s: %s, little.pt has %s" % (k, got.get(k), v) for k, v in want.items() if got.get(k) != v]
            problems += ["unexpected tensor %s" % k for k in got if k not in want]
            facts = json.dumps(j.get("records"))
            if '"big"' not in facts:
                problems.append("the byteorder record is not shown: %s" % facts[:200])
            rep.check("%s inspect --hash: little.pt's numbers" % label, problems)
        rc, o, e = run(tool, "inspect", path)
        rep.check("%s inspect notes the byte order" % label,
                  [] if rc == 0 and "note: big-endian" in o else ["exit %d, no 'note: big-endian' in %r" % (rc, o[-300:])])
        rc, o, e = run(tool, "diff", path, little)
        rep.check("%s diff little.pt" % label, [] if rc == 0 else ["exit %d: %s" % (rc, (e or o).strip()[-300:])])
        for what, extra, dtype in (("to-cpu", [], None), ("to-cpu --dtype bfloat16", ["--dtype", "bfloat16"],
                                                             "bfloat16")):
            dst = os.path.join(out, "%s%s.cpu.pt" % (label, ".bf16" if dtype else ""))
            rc, o, e = run(tool, "to-cpu", "-q", path, "-o", dst, *extra)
            if rc != 0:
                rep.check("%s %s" % (label, what), ["exit %d: %s" % (rc, e.strip())])
                continue
            problems, _ = torch_verify.verify_output(little, dst, dtype=dtype, device="cpu")
            rep.check("%s %s (%s)" % (label, what, tv), problems)
        st = os.path.join(out, label + ".safetensors")
        rc, o, e = run(tool, "convert", "-q", path, st)
        if rc != 0:
            rep.check("%s convert .safetensors" % label, ["exit %d: %s" % (rc, e.strip())])
        else:
            rep.check("%s convert .safetensors (%s)" % (label, tv), check_safetensors(little, st))
    dst = os.path.join(out, "middle.cpu.pt")
    rc, o, e = run(tool, "to-cpu", "-q", files["middle"], "-o", dst)
    lines = e.strip().splitlines()
    problems = [] if rc not in (0,) and rc > 0 else ["exit %d" % rc]
    if len(lines) != 1 or "neither 'little' nor 'big'" not in lines[0]:
        problems.append("expected one error line naming the byteorder, got %r" % lines)
    if os.path.exists(dst):
        problems.append("an output was written")
    rep.check("byteorder 'middle' refused", problems)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
