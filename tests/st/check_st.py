#!/usr/bin/env python3
"""Check tensorctl's safetensors reading and .pt <-> safetensors conversion.

    check_st.py [--only FEATURE[,FEATURE...]] TENSORCTL OUTDIR CORPUS_DIR SAMPLES_DIR
    check_st.py --features        the features, one a line (meson registers st-convert/FEATURE)

CORPUS_DIR: sample_models/corpus, or the reference corpus (laid out alike: torch-1.x/, torch-2.x/).
The features (all without --only), each in OUTDIR/FEATURE: corpus-safetensors (the corpus's own
.safetensors files), pt-round-trip (.pt to safetensors and back), index (shards and their index),
reshard (--max-shard-size), memory (peak RSS of big conversions). Which interpreters import torch
and safetensors is asked once for the tests of one `meson test` (judge.once_per_run).

Without torch (pure Python, always run):
  * every corpus .safetensors file: `inspect --json` agrees with its .expect.json (names, dtypes,
    shapes, strides) and the bytes of every tensor hash to the expected sha256;
  * every corpus/sample .pt: `convert IN OUT.safetensors` writes a file whose header is valid
    (8-byte length, JSON padded with spaces to a multiple of 8, data covered exactly, sorted by
    dtype then name as the reference library sorts) and whose tensors -- and aliases recorded in
    __metadata__ "tensorctl.aliases" -- hash to the input's expected sha256;
  * converting back (`convert OUT.safetensors BACK.pt`) gives, per `inspect --json`, the same
    names, dtypes, shapes, strides, offsets and the same storage sharing as the input.
With each interpreter of $TENSORCTL_EXTRA_PYTHONS (colon-separated) and /usr/bin/python3:
  * where torch imports: torch.load(BACK.pt, weights_only=True) gives tensors equal (sha256) to
    the expected ones, sharing storages where the input did (torch 1.x: files without
    _rebuild_tensor_v3 dtypes only), and torch.save of what it gives writes BACK.pt's data.pkl
    byte for byte (the same memo: strings, storage types and globals fetched where torch fetches);
  * where safetensors imports: safetensors.torch.load_file(OUT) loads every tensor and it equals
    the expected one; save_file of those tensors with the same metadata writes the same bytes
    as tensorctl (header order, padding, offsets).
One line per check, then a count. Exit 1 on any failure, 0 otherwise. A missing CORPUS_DIR, a
missing input or expect file, an interpreter of $TENSORCTL_EXTRA_PYTHONS that is missing or cannot
import torch, and a run with no check at all are failures; only the torch and safetensors checks
of an interpreter that lacks them are skipped (and said so).
"""

import atexit
import hashlib
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import corpus_file, features, once_per_run  # noqa: E402

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1,
         "F8_E5M2FNUZ": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
         "C64": 8, "F64": 8, "I64": 8, "U64": 8}
RANK = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
        "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]
ST_NAMES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "float8_e5m2": "F8_E5M2",
            "float8_e4m3fn": "F8_E4M3", "int16": "I16", "uint16": "U16", "float16": "F16",
            "bfloat16": "BF16", "int32": "I32", "uint32": "U32", "float32": "F32", "complex64": "C64",
            "float64": "F64", "int64": "I64", "uint64": "U64"}
V3 = {"float8_e5m2", "float8_e4m3fn", "uint16", "uint32", "uint64"}
ALIASES = "tensorctl.aliases"

# (file under CORPUS (torch-2/: its torch 2.x folder, judge.corpus_file) or SAMPLES, --key or None)
PT_INPUTS = [
    ("torch-2/lm_cpu.pt", None), ("torch-2/lm_cuda0.pt", None), ("torch-2/dtypes_views.pt", None),
    ("torch-2/new_dtypes_cuda0.pt", None), ("torch-2/train_ckpt_cuda.pt", "model"),
    ("torch-2/mixed_devices.pt", None), ("torch-2/dataparallel_cuda1.pt", None),
    ("torch-2/legacy_cuda0.pt", None), ("torch-2/whole_module_cuda0.pt", None),
    ("torch-2/lightning_style_cuda0.ckpt", "state_dict"), ("torch-1/lm_cpu.pt", None),
    ("torch-1/dtypes_views.pt", None), ("torch-1/legacy_cuda0.pt", None),
    ("samples:tied_views_cpu.pt", None), ("samples:bigger_than_a_chunk.pt", None),
    ("samples:optimizer_ckpt_cuda1.pt", "model"), ("samples:tiny_mlp_cuda0.pt", None),
]

# The torch side, one process an interpreter (torch 2.x takes seconds to import): one request a
# line on stdin, a JSON list [mode, path, *more]; one answer a line on stdout, {"ok": result} or
# {"error": "Type: its last line"}.
HELPER = r'''
import hashlib, json, sys, warnings
warnings.filterwarnings("ignore")
import torch
def digest(t):
    t = t.detach().contiguous().reshape(-1)
    if t.numel() == 0:
        return hashlib.sha256(b"").hexdigest()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()
def sptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:
        return t.storage().data_ptr()
def flat(obj, prefix, out):
    if isinstance(obj, torch.Tensor):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flat(v, prefix + "." + str(k) if prefix else str(k), out)
def job(mode, path, *more):
    res, ts = {}, {}
    if mode == "pt":
        obj = torch.load(path, weights_only=True)
        flat(obj, "", ts)
    elif mode == "repickle":  # torch.save of what torch.load gives: the same pickle as path's?
        import io, zipfile
        def pickle_of(f):
            z = zipfile.ZipFile(f)
            return z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
        buf = io.BytesIO()
        torch.save(torch.load(path, weights_only=True), buf)
        ours, theirs = pickle_of(path), pickle_of(buf)
        return {"same": ours == theirs, "ours": len(ours), "torch": len(theirs)}
    elif mode in ("st", "resave"):
        from safetensors.torch import load_file, save_file
        ts = load_file(path)
        if mode == "resave":
            from safetensors import safe_open
            with safe_open(path, framework="pt") as f:
                meta = f.metadata()
            save_file(ts, more[0], metadata=meta)
            ts = {}
    else:
        raise ValueError("no mode " + mode)
    for k, t in ts.items():
        res[k] = {"sha256": digest(t), "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                  "storage": sptr(t), "device": str(t.device)}
    return res
for line in sys.stdin:
    try:
        out = {"ok": job(*json.loads(line))}
    except Exception as e:
        lines = str(e).strip().splitlines()
        out = {"error": "%s: %s" % (type(e).__name__, lines[-1] if lines else "")}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
'''


class Report:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def check(self, ok, what, why=""):
        if ok:
            self.passed += 1
            print("PASS", what)
        else:
            self.failed += 1
            print("FAIL", what, "--", why)
        return ok

    def skip(self, what, why):
        self.skipped += 1
        print("SKIP", what, "--", why)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    raw = data[8:8 + n]
    hdr = json.loads(raw)
    return n, raw, hdr, data[8 + n:]


def gather(buf, esz, offset, shape, stride):
    """Bytes of a strided view of buf, in C order."""
    out = bytearray()
    if any(s == 0 for s in shape):
        return bytes(out)
    idx = [0] * len(shape)
    while True:
        el = offset + sum(i * s for i, s in zip(idx, stride))
        out += buf[el * esz:(el + 1) * esz]
        k = len(shape) - 1
        while k >= 0:
            idx[k] += 1
            if idx[k] < shape[k]:
                break
            idx[k] = 0
            k -= 1
        if k < 0:
            return bytes(out)


def st_tensors(path, r, what):
    """{name: sha256} of a safetensors file, aliases included; checks the layout."""
    n, raw, hdr, data = read_st(path)
    r.check(n % 8 == 0 and raw.rstrip(b" ").endswith(b"}"), what + ": header padded with spaces to 8")
    meta = hdr.pop("__metadata__", {})
    items = sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"])
    pos = 0
    ok = True
    for name, info in items:
        b, e = info["data_offsets"]
        ok &= b == pos
        pos = e
    ok &= pos == len(data)
    r.check(ok, what + ": data covered exactly")
    order = list(hdr.keys())
    want = sorted(order, key=lambda k: (-RANK.index(hdr[k]["dtype"]), k.encode()))
    r.check(order == want and [k for k, _ in items] == want, what + ": sorted as the reference library sorts")
    out = {}
    for name, info in hdr.items():
        b, e = info["data_offsets"]
        out[name] = hashlib.sha256(data[b:e]).hexdigest()
    aliases = json.loads(meta.get(ALIASES, "{}"))
    for name, a in aliases.items():
        base = hdr[a["of"]]
        b, e = base["data_offsets"]
        view = gather(data[b:e], SIZES[base["dtype"]], a["offset"], a["shape"], a["stride"])
        out[name] = hashlib.sha256(view).hexdigest()
    return out, meta, aliases


def expect_of(path, key):
    with open(path + ".expect.json") as f:
        ex = json.load(f)
    out = {}
    for t in ex["tensors"]:
        name = ".".join(str(p) for p in t["path"])
        if key:
            if not name.startswith(key + "."):
                continue
            name = name[len(key) + 1:]
        out[name] = t
    return out


def inspect(tc, path):
    rc, so, se = run([tc, "inspect", "--json", path])
    if rc not in (0, 4):
        raise RuntimeError("inspect %s: exit %d: %s" % (path, rc, se.strip()))
    return json.loads(so)


def sharing(insp, names):
    """Partition of names by storage."""
    groups = {}
    for t in insp["tensors"]:
        if t["name"] in names and t["storage"] is not None:
            groups.setdefault(t["storage"], set()).add(t["name"])
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def contiguous_strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return list(reversed(out))


def interpreters():
    """[(path, asked)]: each interpreter of $TENSORCTL_EXTRA_PYTHONS (asked for), then /usr/bin/python3."""
    seen, out = set(), []
    for p, asked in [(p, True) for p in os.environ.get("TENSORCTL_EXTRA_PYTHONS", "").split(":")] + \
            [("/usr/bin/python3", False)]:
        if p and os.path.realpath(p) not in seen:
            seen.add(os.path.realpath(p))
            out.append((p, asked))
    return out


def probe(py):
    code = ("import importlib.util as u, json; import torch; print(json.dumps({'torch': torch.__version__, "
            "'st': u.find_spec('safetensors') is not None}))")
    rc, so, _ = run([py, "-c", code])
    if rc:
        return None
    return json.loads(so.strip().splitlines()[-1])


_helpers = {}


def _close_helpers():
    for p, err in _helpers.values():
        p.stdin.close()
        p.wait()
        err.close()


atexit.register(_close_helpers)


def helper(py, outdir, *args):
    """(result, None) of HELPER's job args in interpreter py, or (None, why)."""
    if py not in _helpers:
        hp = os.path.join(outdir, "st_helper.py")
        with open(hp, "w") as f:
            f.write(HELPER)
        err = open(os.path.join(outdir, "st_helper.%d.err" % len(_helpers)), "w+")
        try:
            p = subprocess.Popen([py, hp], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        except OSError as e:
            return None, str(e)
        _helpers[py] = (p, err)
    p, err = _helpers[py]
    try:
        p.stdin.write(json.dumps(list(args)) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
    except BrokenPipeError:
        line = ""
    if not line:  # it died (torch did not import, or the job killed it): the next call starts another
        del _helpers[py]
        p.wait()
        err.seek(0)
        lines = err.read().strip().splitlines()
        err.close()
        return None, lines[-1] if lines else "exit %d" % p.returncode
    ans = json.loads(line)
    return (ans["ok"], None) if "ok" in ans else (None, ans["error"])


def write_st(path, tensors, meta):
    """A safetensors file from {name: (dtype, shape, bytes)}, sorted as the reference sorts."""
    names = sorted(tensors, key=lambda k: (-RANK.index(tensors[k][0]), k.encode()))
    hdr, pos, data = {"__metadata__": meta}, 0, b""
    for n in names:
        dt, shape, b = tensors[n]
        hdr[n] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + len(b)]}
        pos += len(b)
        data += b
    raw = json.dumps(hdr, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)


def check_shards(tc, outdir, corpus, r, pys):
    src = corpus_file(corpus, "torch-2/lm.safetensors")
    ex = expect_of(src, None)
    _, _, hdr, data = read_st(src)
    hdr.pop("__metadata__", None)
    names = sorted(hdr)
    d = os.path.join(outdir, "shards")
    os.makedirs(d, exist_ok=True)
    wm = {}
    for i, part in enumerate((names[:6], names[6:])):
        fn = "model-%05d-of-00002.safetensors" % (i + 1)
        write_st(os.path.join(d, fn), {n: (hdr[n]["dtype"], hdr[n]["shape"],
                                           data[hdr[n]["data_offsets"][0]:hdr[n]["data_offsets"][1]])
                                       for n in part}, {"format": "pt"})
        wm.update({n: fn for n in part})
    index = os.path.join(d, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": len(data)}, "weight_map": wm}, f)
    insp = inspect(tc, index)
    r.check(insp["format"] == "safetensors-index" and {t["name"] for t in insp["tensors"]} == set(names)
            and insp["records"].get("shards") == "2", "index: inspect lists every tensor of both shards")
    bad = os.path.join(d, "bad.safetensors.index.json")
    with open(bad, "w") as f:
        json.dump({"metadata": {}, "weight_map": dict(wm, ghost="model-00001-of-00002.safetensors")}, f)
    rc, _, se = run([tc, "inspect", bad])
    r.check(rc == 3 and "the index maps tensor 'ghost' to it, but it is not there" in se,
            "index: a tensor missing from its shard is reported", se.strip())
    pt_dir, st_dir = os.path.join(d, "pt"), os.path.join(d, "st")
    os.makedirs(pt_dir, exist_ok=True)
    os.makedirs(st_dir, exist_ok=True)
    pt_index = os.path.join(pt_dir, "pytorch_model.bin.index.json")
    rc, _, se = run([tc, "convert", "-f", index, pt_index])
    if not r.check(rc == 0, "index: convert to .bin shards", se.strip()):
        return
    st_index = os.path.join(st_dir, "model.safetensors.index.json")
    rc, _, se = run([tc, "convert", "-f", pt_index, st_index])
    if not r.check(rc == 0, "index: convert back to safetensors shards", se.strip()):
        return
    with open(st_index) as f:
        ix = json.load(f)
    # the default --max-shard-size (5GB) merges the two small input shards into one
    r.check(sorted(set(ix["weight_map"].values())) == ["model-00001-of-00001.safetensors"]
            and ix["metadata"]["total_size"] == len(data), "index: shard names and total_size as transformers",
            str(sorted(set(ix["weight_map"].values()))))
    got = {}
    for fn in set(ix["weight_map"].values()):
        h, _, _ = st_tensors(os.path.join(st_dir, fn), r, "index: " + fn)
        got.update(h)
    r.check(all(got.get(n) == ex[n]["sha256"] for n in names) and len(got) == len(names),
            "index: every tensor bit for bit after .safetensors -> .bin -> .safetensors shards")
    for py, ver in pys:
        with open(pt_index) as f:
            pix = json.load(f)
        tens = {}
        for fn in set(pix["weight_map"].values()):
            res, err = helper(py, outdir, "pt", os.path.join(pt_dir, fn))
            if not r.check(res is not None, "index: torch.load of %s with %s" % (fn, py), err):
                return
            tens.update(res)
        r.check(all(tens.get(n, {}).get("sha256") == ex[n]["sha256"] for n in names),
                "index: .bin shards equal the input with " + py)
    # a set joined into one file: OUT named as a file, not a folder or an index
    one_st, one_pt = os.path.join(d, "one.safetensors"), os.path.join(d, "one.pt")
    rc, _, se = run([tc, "convert", "-f", index, one_st])
    if r.check(rc == 0 and os.path.isfile(one_st), "index: joined into one .safetensors file", se.strip()):
        h, _, _ = st_tensors(one_st, r, "index: one.safetensors")
        r.check(h == {n: ex[n]["sha256"] for n in names}, "index: the joined .safetensors holds every tensor bit for bit")
    rc, _, se = run([tc, "convert", "-f", pt_index, one_pt])
    if r.check(rc == 0 and os.path.isfile(one_pt), "index: a .bin set joined into one .pt file", se.strip()):
        for py, ver in pys:
            res, err = helper(py, outdir, "pt", one_pt)
            r.check(res is not None and {n: t["sha256"] for n, t in res.items()} == {n: ex[n]["sha256"] for n in names},
                    "index: the joined .pt loads in torch (%s) with every tensor bit for bit" % py, err)
    rc, _, se = run([tc, "convert", "--max-shard-size", "1KB", index, os.path.join(d, "two.pt")])
    r.check(rc == 2 and not os.path.exists(os.path.join(d, "two.pt")) and "writes a sharded set" in se,
            "index: --max-shard-size with a file OUT is refused", se.strip())


def hashes_of(tc, path):
    """{name: sha256} of one file, from `inspect --json --hash`."""
    rc, so, se = run([tc, "inspect", "--json", "--hash", path])
    if rc not in (0, 4):
        raise RuntimeError("inspect --hash %s: exit %d: %s" % (path, rc, se.strip()))
    return {t["name"]: t["sha256"] for t in json.loads(so)["tensors"]}


def shard_units(tc, path, st):
    """Bytes of tensor data in a shard, the number of units it holds (safetensors: tensors in the header;
    .bin: storages) and the names it holds (safetensors: the header's, aliases apart)."""
    if st:
        _, _, hdr, data = read_st(path)
        meta = hdr.pop("__metadata__", {})
        return len(data), len(hdr), set(hdr), set(json.loads(meta.get(ALIASES, "{}")))
    insp = inspect(tc, path)
    return (sum(s["nbytes"] for s in insp["storages"]), len(insp["storages"]),
            {t["name"] for t in insp["tensors"]}, set())


def load_reshard(r, what, index, st, want_hash, outdir, pys):
    """torch.load (.bin) or safetensors.load_file of every shard of a set: what the index maps there, equal."""
    d = os.path.dirname(index)
    with open(index) as f:
        wm = json.load(f)["weight_map"]
    for py, ver in pys:
        if st and not ver["st"]:
            continue
        bad = []
        for fn in sorted(set(wm.values())):
            res, err = helper(py, outdir, "st" if st else "pt", os.path.join(d, fn))
            if res is None:
                bad.append("%s: %s" % (fn, err))
                continue
            mapped = {k for k, v in wm.items() if v == fn}
            bad += ["%s: %s" % (fn, k) for k in mapped ^ set(res)]
            bad += ["%s: %s differs" % (fn, k) for k in res if res[k]["sha256"] != want_hash.get(k)]
        r.check(not bad, "%s: %s of every shard with %s gives the tensors the index maps there, equal to the input's"
                % (what, "safetensors.load_file" if st else "torch.load", py), str(bad[:5]))


def check_reshard_out(tc, r, what, index, limit, st, want_hash, min_shards=None, max_shards=None):
    """An output set: names as transformers gives them, each shard within limit (or one unit alone), the
    index mapping every tensor to the shard holding it, inspect's shard checks, and every tensor's sha256."""
    d = os.path.dirname(index)
    with open(index) as f:
        ix = json.load(f)
    files = sorted(set(ix["weight_map"].values()))
    n = len(files)
    pat = "model-%05d-of-%05d.safetensors" if st else "pytorch_model-%05d-of-%05d.bin"
    r.check(files == [pat % (i + 1, n) for i in range(n)], what + ": %d shards named as transformers names them" % n,
            str(files))
    on_disk = sorted(f for f in os.listdir(d) if f.startswith("model-" if st else "pytorch_model-"))
    r.check(on_disk == files, what + ": no other shard files", str(on_disk))
    if min_shards is not None:
        r.check(n >= min_shards, what + ": at least %d shards" % min_shards, str(n))
    if max_shards is not None:
        r.check(n <= max_shards, what + ": at most %d shards" % max_shards, str(n))
    r.check(list(ix) == ["metadata", "weight_map"] and list(ix["weight_map"]) == sorted(ix["weight_map"]),
            what + ": index metadata then weight_map, sorted")
    total, got, bad_size, bad_map = 0, {}, [], []
    for fn in files:
        path = os.path.join(d, fn)
        nbytes, units, names, aliases = shard_units(tc, path, st)
        total += nbytes
        if nbytes > limit and units != 1:
            bad_size.append("%s: %d bytes in %d units" % (fn, nbytes, units))
        mapped = {k for k, v in ix["weight_map"].items() if v == fn}
        if mapped != names:
            bad_map.append("%s: %s" % (fn, sorted(mapped ^ names)))
        h = hashes_of(tc, path)
        if st:
            h2, _, _ = st_tensors(path, r, what + ": " + fn)
            r.check(all(h2[k] == h[k] for k in h), what + ": %s: inspect --hash agrees with the bytes" % fn)
            h = h2  # aliases included, gathered from the tensor they view, which is in this shard
        for k, v in h.items():
            got.setdefault(k, []).append(v)
    r.check(not bad_size, what + ": every shard holds at most %d bytes of tensor data, or one unit" % limit,
            str(bad_size))
    r.check(not bad_map, what + ": the index maps every tensor to the shard holding it", str(bad_map))
    r.check(ix["metadata"].get("total_size") == total, what + ": metadata.total_size is the data in the shards",
            "%s vs %d" % (ix["metadata"].get("total_size"), total))
    dup = sorted(k for k, v in got.items() if len(v) > 1)
    bad = sorted(k for k in want_hash if got.get(k, [None])[0] != want_hash[k])
    r.check(not dup and not bad and set(got) == set(want_hash),
            what + ": every tensor once, its sha256 equal to the input's", str((dup, bad[:5], set(got) ^ set(want_hash))))
    rc, so, se = run([tc, "inspect", index])
    r.check(rc == 0 and ("shards %d" % n) in so and "ok)" in so and not se.strip(),
            what + ": inspect OUT.index.json passes its shard checks", se.strip())


def check_reshard(tc, outdir, corpus, samples, r, pys):
    """--max-shard-size: several small input shards into more (tiny SIZE) or one (large SIZE), both formats."""
    src = corpus_file(corpus, "torch-2/lm.safetensors")
    ex = {n: t["sha256"] for n, t in expect_of(src, None).items()}
    _, _, hdr, data = read_st(src)
    hdr.pop("__metadata__", None)
    names = sorted(hdr)
    base = os.path.join(outdir, "reshard")
    if os.path.isdir(base):
        import shutil
        shutil.rmtree(base)
    ind = os.path.join(base, "in")
    os.makedirs(ind)
    parts = [names[0:3], names[3:6], names[6:9], names[9:]]
    wm = {}
    for i, part in enumerate(parts):
        fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(parts))
        write_st(os.path.join(ind, fn), {n: (hdr[n]["dtype"], hdr[n]["shape"],
                                             data[hdr[n]["data_offsets"][0]:hdr[n]["data_offsets"][1]])
                                         for n in part}, {"format": "pt", "note": "shard %d" % i})
        wm.update({n: fn for n in part})
    index = os.path.join(ind, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": len(data), "origin": "test"}, "weight_map": wm}, f)
    inh = {}
    for fn in set(wm.values()):
        inh.update(hashes_of(tc, os.path.join(ind, fn)))
    r.check(inh == ex, "reshard: input shards hash as the expect file says")
    tiny, large = 3000, 10 ** 9
    # st -> st, st -> bin (tiny), then bin -> st, bin -> bin (several .bin inputs merged into one)
    outs = {}
    for tag, src_index, st, size in (("st-tiny", index, True, "3KB"), ("bin-tiny", index, False, "3KB"),
                                     ("st-large", None, True, "1GB"), ("bin-large", None, False, "1GB")):
        o = os.path.join(base, tag)
        os.makedirs(o)
        src_index = src_index or outs["bin-tiny" if tag == "st-large" else "st-tiny"]
        out_index = os.path.join(o, "model.safetensors.index.json" if st else "pytorch_model.bin.index.json")
        rc, _, se = run([tc, "convert", src_index, out_index, "--max-shard-size", size])
        what = "reshard %s (from %s)" % (tag, os.path.basename(os.path.dirname(src_index)))
        if not r.check(rc == 0, what + ": convert", se.strip()):
            continue
        outs[tag] = out_index
        limit = tiny if size == "3KB" else large
        check_reshard_out(tc, r, what, out_index, limit, st, ex, min_shards=len(parts) + 1 if limit == tiny else 1,
                          max_shards=None if limit == tiny else 1)
        load_reshard(r, what, out_index, st, ex, outdir, pys)
        with open(out_index) as f:
            r.check(json.load(f)["metadata"].get("origin") == "test", what + ": the input index's metadata kept")
    # an existing folder as OUT, and the default size (5GB): one shard
    o = os.path.join(base, "default")
    os.makedirs(o)
    rc, _, se = run([tc, "convert", "--format", "safetensors", index, o + "/"])
    if r.check(rc == 0, "reshard default size, OUT a folder: convert", se.strip()):
        check_reshard_out(tc, r, "reshard default size", os.path.join(o, "model.safetensors.index.json"),
                          5 * 10 ** 9, True, ex, max_shards=1)
    # sizes are planned after the cast: float16 halves every tensor
    ref = os.path.join(base, "lm16.safetensors")
    rc, _, se = run([tc, "convert", "-q", "--dtype", "float16", src, ref])
    ex16, _, _ = st_tensors(ref, r, "reshard: lm.safetensors as float16")
    o = os.path.join(base, "f16")
    os.makedirs(o)
    rc, _, se = run([tc, "convert", "--dtype", "float16", "--max-shard-size", "2.2KB", index,
                     os.path.join(o, "model.safetensors.index.json")])
    if r.check(rc == 0, "reshard --dtype float16: convert", se.strip()):
        check_reshard_out(tc, r, "reshard --dtype float16 into 2.2KB", os.path.join(o, "model.safetensors.index.json"),
                          2200, True, ex16, max_shards=5)
    # shared storages stay together: tied weights and views, from a .bin shard, to both formats
    tied = os.path.join(samples, "tied_views_cpu.pt")
    if r.check(os.path.exists(tied + ".expect.json"), "reshard: tied_views_cpu.pt has its expect file", tied):
        tex = {n: t["sha256"] for n, t in expect_of(tied, None).items()}
        td = os.path.join(base, "tied")
        os.makedirs(td)
        with open(tied, "rb") as f, open(os.path.join(td, "pytorch_model-00001-of-00001.bin"), "wb") as g:
            g.write(f.read())
        tindex = os.path.join(td, "pytorch_model.bin.index.json")
        with open(tindex, "w") as f:
            json.dump({"metadata": {}, "weight_map": {n: "pytorch_model-00001-of-00001.bin" for n in tex}}, f)
        for st in (True, False):
            o = os.path.join(base, "tied-" + ("st" if st else "bin"))
            os.makedirs(o)
            oi = os.path.join(o, "model.safetensors.index.json" if st else "pytorch_model.bin.index.json")
            rc, _, se = run([tc, "convert", "-q", tindex, oi, "--max-shard-size", "100"])
            what = "reshard tied views to " + ("safetensors" if st else ".bin")
            if not r.check(rc == 0, what + ": convert", se.strip()):
                continue
            check_reshard_out(tc, r, what, oi, 100, st, tex, min_shards=2)
            if not st:
                load_reshard(r, what, oi, st, tex, outdir, pys)
            if not st:
                ii = inspect(tc, tied)
                groups = []
                with open(oi) as f:
                    for fn in sorted(set(json.load(f)["weight_map"].values())):
                        groups += sharing(inspect(tc, os.path.join(o, fn)), set(tex))
                r.check(sorted(groups) == sharing(ii, set(tex)), what + ": storage sharing kept within shards",
                        "%s vs %s" % (sorted(groups), sharing(ii, set(tex))))
    # errors: existing outputs refused before anything is written; a later shard failing removes the earlier
    o = os.path.join(base, "st-tiny")
    with open(os.path.join(o, "model.safetensors.index.json")) as f:
        n = len(set(json.load(f)["weight_map"].values()))
    before = sorted(os.listdir(o))
    rc, _, se = run([tc, "convert", index, os.path.join(o, "model.safetensors.index.json"), "--max-shard-size", "3KB"])
    r.check(rc == 2 and len(se.strip().splitlines()) == 1 and "exists (use --force" in se
            and sorted(os.listdir(o)) == before, "reshard: existing outputs refused, nothing written", se.strip())
    o = os.path.join(base, "fail")
    os.makedirs(os.path.join(o, "model-00002-of-%05d.safetensors" % n))
    rc, _, se = run([tc, "convert", "-f", index, os.path.join(o, "model.safetensors.index.json"),
                     "--max-shard-size", "3KB"])
    left = sorted(os.listdir(o))
    r.check(rc == 2 and len(se.strip().splitlines()) == 1
            and se.startswith("tensorctl: %s/model-00002-of-%05d.safetensors: is a folder" % (o, n))
            and left == ["model-00002-of-%05d.safetensors" % n],
            "reshard: a folder in the way of a later shard is refused before anything is written, --force or not",
            "exit %d: %s; left %s" % (rc, se.strip(), left))


def max_rss_kb(cmd):
    """Exit status and peak RSS (KiB) of cmd, measured in a fresh process."""
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.PIPE); sys.stderr.write(p.stderr.decode()); "
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    rc, so, se = run([sys.executable, "-c", code] + cmd)
    st, kb = so.split()
    return int(st), int(kb), se.strip()


def check_memory(tc, outdir, r):
    """160 MiB of tensors, one of them reached only through a transposed view: every step stays under 64 MiB."""
    d = os.path.join(outdir, "mem")
    os.makedirs(d, exist_ok=True)
    rows, cols = 4096, 4096  # 64 MiB of float32
    blob = struct.pack("<f", 1.5) * 16 + bytes(range(256)) * 16
    big = (blob * (rows * cols * 4 // len(blob) + 1))[:rows * cols * 4]
    other = bytes(96 << 20)
    aliases = {"y.view": {"of": "x.base", "offset": 3, "shape": [cols - 1, rows // 2], "stride": [1, cols * 2],
                          "same": False}}
    src = os.path.join(d, "big.safetensors")
    write_st(src, {"x.base": ("F32", [rows, cols], big), "x.other": ("U8", [len(other)], other)},
             {"format": "pt", ALIASES: json.dumps(aliases)})
    pt = os.path.join(d, "big.pt")
    steps = [("safetensors -> .pt", [tc, "convert", "-q", "-f", src, pt]),
             ("lone transposed view -> safetensors (--key y)",
              [tc, "convert", "-q", "-f", "--key", "y", pt, os.path.join(d, "view.safetensors")]),
             (".pt -> safetensors with --dtype bfloat16",
              [tc, "convert", "-q", "-f", "--dtype", "bfloat16", pt, os.path.join(d, "bf16.safetensors")])]
    for what, cmd in steps:
        rc, kb, se = max_rss_kb(cmd)
        r.check(rc == 0 and kb < 64 * 1024, "memory: %s in %d KiB" % (what, kb), se)
    view = bytearray()
    a = aliases["y.view"]
    esz = 4
    for i in range(a["shape"][0]):
        for j in range(a["shape"][1]):
            el = a["offset"] + i * a["stride"][0] + j * a["stride"][1]
            view += big[el * esz:(el + 1) * esz]
    got, _, _ = st_tensors(os.path.join(d, "view.safetensors"), r, "memory: view.safetensors")
    r.check(got.get("view") == hashlib.sha256(bytes(view)).hexdigest(), "memory: the gathered view is bit for bit")
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))


def probe_all():
    """[(path, probe or None, asked)] for every interpreter: the set-up the torch features share."""
    return [(p, probe(p) if os.path.exists(p) else None, asked) for p, asked in interpreters()]


def torch_pythons(outdir, r):
    """[(path, probe)] of the interpreters with torch, probed once for the run (judge.once_per_run);
    a missing interpreter of TENSORCTL_EXTRA_PYTHONS is a failure, /usr/bin/python3 without torch a skip."""
    env = hashlib.sha256(os.environ.get("TENSORCTL_EXTRA_PYTHONS", "").encode()).hexdigest()[:12]
    pys = []
    for p, v, asked in once_per_run(os.path.dirname(outdir), "interpreters-" + env, probe_all):
        if v:
            pys.append((p, v))
            if not v["st"]:
                r.skip("safetensors checks with " + p, "the safetensors library is not importable there")
        elif asked:
            r.check(False, "interpreter %s of TENSORCTL_EXTRA_PYTHONS" % p, "missing or cannot import torch")
        else:
            r.skip("torch checks with " + p, "missing or cannot import torch")
    if not pys:
        r.skip("torch checks", "no interpreter with torch (set TENSORCTL_EXTRA_PYTHONS)")
    return pys


def check_corpus_st(tc, outdir, corpus, samples, r):
    """The corpus's safetensors files against their expect files."""
    for fn in ("dtypes.safetensors", "lm.safetensors"):
        path = corpus_file(corpus, "torch-2/" + fn)
        ex = expect_of(path, None)
        insp = inspect(tc, path)
        r.check(insp["format"] == "safetensors" and "metadata" in insp, fn + ": format and metadata in --json")
        got = {t["name"]: t for t in insp["tensors"]}
        r.check(set(got) == set(ex), fn + ": tensor names", str(set(got) ^ set(ex)))
        bad = [n for n in ex if n in got and (got[n]["dtype"] != ex[n]["dtype"] or got[n]["shape"] != ex[n]["shape"]
                                              or got[n]["stride"] != ex[n]["stride"] or got[n]["device"] != "-")]
        r.check(not bad, fn + ": dtype, shape, stride, device '-'", str(bad))
        hashes, _, _ = st_tensors(path, r, fn)
        bad = [n for n in ex if hashes.get(n) != ex[n]["sha256"]]
        r.check(not bad, fn + ": tensor bytes match sha256", str(bad))


def check_pt_round_trip(tc, outdir, corpus, samples, r):
    """Every corpus and sample .pt to safetensors and back, judged by torch and safetensors."""
    pys = torch_pythons(outdir, r)
    for rel, key in PT_INPUTS:
        path = os.path.join(samples, rel[8:]) if rel.startswith("samples:") else corpus_file(corpus, rel)
        if not r.check(os.path.exists(path) and os.path.exists(path + ".expect.json"),
                       rel + ": the input and its expect file exist", path):
            continue
        tag = rel.replace("/", "_").replace(":", "_")
        st = os.path.join(outdir, tag + ".safetensors")
        back = os.path.join(outdir, tag + ".back.pt")
        ex = expect_of(path, key)
        dropped = {n for n, t in ex.items() if t["dtype"] not in ST_NAMES}
        cmd = [tc, "convert", "-f", path, st] + (["--key", key] if key else [])
        if dropped:  # refused, naming a tensor safetensors cannot hold, until --drop leaves them out
            if os.path.exists(st):
                os.remove(st)
            rc, _, se = run(cmd)
            r.check(rc == 2 and any("tensor '%s'" % n in se and "--drop" in se for n in dropped)
                    and not os.path.exists(st), rel + ": a tensor safetensors cannot hold is refused, naming it",
                    "exit %d: %s" % (rc, se.strip()))
            for n in sorted(dropped):
                cmd += ["--drop", n]
        rc, _, se = run(cmd)
        if not r.check(rc == 0, rel + ": convert to safetensors", se.strip()):
            continue
        hashes, meta, aliases = st_tensors(st, r, rel)
        r.check(meta.get("format") == "pt", rel + ": __metadata__ format pt")
        bad = [n for n in ex if n not in dropped and hashes.get(n) != ex[n]["sha256"]]
        r.check(not bad, rel + ": every tensor bit for bit (aliases included)", str(bad[:5]))
        r.check(not (set(hashes) - set(ex)), rel + ": no extra tensors", str(set(hashes) - set(ex)))
        rc, _, se = run([tc, "convert", "-f", st, back])
        if not r.check(rc == 0, rel + ": convert back to .pt", se.strip()):
            continue
        ib, ii = inspect(tc, back), inspect(tc, path)
        if key:
            for t in ii["tensors"]:
                t["name"] = t["name"][len(key) + 1:] if t["name"].startswith(key + ".") else "\0" + t["name"]
        names = set(hashes)
        gb = {t["name"]: t for t in ib["tensors"]}
        gi = {t["name"]: t for t in ii["tensors"] if t["name"] in names}
        for n, t in gi.items():
            if n not in aliases and n in gb:  # written tensors come back contiguous
                t["stride"] = contiguous_strides(t["shape"])
                t["storage_offset"] = 0
        bad = [n for n in gi if n not in gb or any(gi[n][k] != gb[n][k] for k in
                                                   ("dtype", "shape", "stride", "storage_offset"))]
        r.check(not bad and set(gb) == names,
                rel + ": round trip keeps names, dtypes, shapes, alias strides and offsets", str(bad[:5]))
        r.check(sharing(ii, names) == sharing(ib, names), rel + ": round trip keeps storage sharing",
                "%s vs %s" % (sharing(ii, names), sharing(ib, names)))
        r.check(all(t["device"] == "cpu" for t in ib["tensors"]), rel + ": .pt output tagged cpu")
        has_v3 = any(ex[n]["dtype"] in V3 for n in names)
        for py, ver in pys:
            who = "%s (torch %s)" % (py, ver["torch"])
            if has_v3 and ver["torch"].startswith("1."):
                r.skip(rel + ": torch.load with " + who, "float8/uint16+ need torch >= 2.1")
            else:
                res, err = helper(py, outdir, "pt", back)
                if r.check(res is not None, rel + ": torch.load(weights_only=True) with " + who, err):
                    bad = [n for n in names if res.get(n, {}).get("sha256") != ex[n]["sha256"]]
                    r.check(not bad and set(res) == names, rel + ": torch tensors equal the input with " + who,
                            str(bad[:5]))
                    ptr = {}
                    for n in names:
                        ptr.setdefault(res[n]["storage"], set()).add(n)
                    torch_share = sorted(sorted(g) for g in ptr.values() if len(g) > 1)
                    r.check(torch_share == sharing(ii, names), rel + ": torch sees the same sharing with " + who,
                            str(torch_share))
                res, err = helper(py, outdir, "repickle", back)
                if r.check(res is not None, rel + ": torch.save of what torch.load gives with " + who, err):
                    r.check(res["same"], rel + ": data.pkl is the one torch.save writes for the same tensors with " + who,
                            "%d bytes, torch's %d" % (res["ours"], res["torch"]))
            if not ver["st"]:
                continue
            res, err = helper(py, outdir, "st", st)
            if r.check(res is not None, rel + ": safetensors.load_file with " + who, err):
                written = names - set(aliases)
                bad = [n for n in written if res.get(n, {}).get("sha256") != ex[n]["sha256"]]
                r.check(not bad and set(res) == written, rel + ": load_file tensors equal the input with " + who,
                        str(bad[:5]))
                ref = st + ".ref"
                res2, err = helper(py, outdir, "resave", st, ref)
                if r.check(res2 is not None, rel + ": save_file of the same tensors with " + who, err):
                    # the reference keeps metadata in a hash map: its key order varies from run to run
                    na, rawa, ha, da = read_st(st)
                    nb, rawb, hb, db = read_st(ref)
                    same = na == nb and da == db and ha == hb and list(ha) == list(hb)
                    if len(meta) <= 1:
                        same &= rawa == rawb
                    r.check(same, rel + ": same header (order, offsets, padding) and data as safetensors.save_file")


FEATURES = {
    "corpus-safetensors": check_corpus_st,
    "pt-round-trip": check_pt_round_trip,
    "index": lambda tc, outdir, corpus, samples, r: check_shards(tc, outdir, corpus, r, torch_pythons(outdir, r)),
    "reshard": lambda tc, outdir, corpus, samples, r: check_reshard(tc, outdir, corpus, samples, r,
                                                                    torch_pythons(outdir, r)),
    "memory": lambda tc, outdir, corpus, samples, r: check_memory(tc, outdir, r),
}


def main():
    only, argv = features(sys.argv[1:], list(FEATURES))
    if len(argv) != 4:
        print(__doc__)
        return 2
    tc, outdir, corpus, samples = argv
    r = Report()
    if not os.path.isdir(corpus):
        print("FAIL: the corpus %s is missing" % corpus)
        return 1
    for name in only:  # each feature in a folder of its own: their tests run side by side
        print("# %s" % name)
        sub = os.path.join(outdir, name)
        os.makedirs(sub, exist_ok=True)
        FEATURES[name](tc, sub, corpus, samples, r)
    print("%d passed, %d failed, %d skipped" % (r.passed, r.failed, r.skipped))
    if r.passed + r.failed == 0:
        print("FAIL: no check ran")
        return 1
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
