#!/usr/bin/env python3
"""Outputs share their unchanged tensor data with the input where the file system clones blocks.

    check_reflink.py run --tensorctl T [--unit TEST_XFER] [--shim SHIM] [--run-with-torch SH] [--keep]
                     [--fs xfs,btrfs] [--only CHECK[,CHECK...]] FILE...
    check_reflink.py --features            the checks (CHECKS below), one a line
    check_reflink.py torch PAIRS.json        (the torch half, run by tests/run_with_torch.sh)

run (as root) makes a sparse 2 GiB XFS image (mkfs.xfs -m reflink=1) in a temporary folder,
loop-mounts it, and there (then again on btrfs, where mkfs.btrfs is installed):
  * copies FILE... (corpus and sample checkpoints) in, and writes a ~200 MB checkpoint and a sharded
    set of three shards (torch's zip layout, made here byte by byte: no torch needed) whose data
    records start at many different offsets within a 4 KiB block;
  * runs to-cpu, to-cuda --device cuda:1, to-cpu --map, to-cpu --verify-crc and convert to .pt on
    every file, to-cpu and convert (re-sharding) of the set, and to-cpu --dtype bfloat16 of the big
    file, each with -v;
  * checks every output: each data record's data is 64-byte aligned (torch's layout); the blocks
    -v reports as shared are exactly the output's blocks that FIEMAP shows as shared extents lying
    on the input's own physical blocks; for a zip input that is every whole 4 KiB block of every
    stored, 64-byte aligned data record (all of the data but the partial blocks at either end of
    each record), and nothing for a cast; shared + copied + written is the output's size; Python's
    zipfile and `unzip -t` find every CRC-32 right;
  * rewrites a copy of the big checkpoint --in-place: the new file lies on the old one's blocks;
  * consolidates a distributed checkpoint (made here byte by byte: a tensor in three row chunks,
    two at the same offset within a block as their place in the output, one not) to .pt: exactly
    the whole blocks of the two are shared;
  * refuses the first clone of a to-cpu (the fault injection shim, SHIM): that record is copied
    (read and written), the output is still whole and right;
  * runs the transfer's unit test (TEST_XFER) with its files in the image, where it must see its
    blocks shared;
  * has torch (each interpreter run_with_torch.sh finds) load every output and compare it with its
    input bit for bit (tests/torch_verify.py: tensors, views, sharing, location tags, and
    weights_only=True wherever the input loads that way);
then unmounts the image and removes everything, also on a failure or SIGTERM.

--fs: the file systems; --only: the checks of CHECKS to run (files, refused, in-place, set, dcp,
unit), torch then loading the outputs they made. meson runs one test for each file system and
check (reflink-xfs/CHECK, reflink-btrfs/CHECK): each makes and mounts an image of its own and puts
there only the inputs its check judges (FILE... and big.pt for files; big.pt for refused and
in-place; set, dcp and unit make theirs). A run of btrfs alone skips (77) without mkfs.btrfs.

One line per check (PASS/FAIL/SKIP), then `N passed, M failed, K skipped`. Exit 0; 1 on a failure;
77 (skipped) when not root, without mkfs.xfs, or where no loop device can be mounted.
"""
import argparse
import array
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hostile"))
sys.path.insert(0, os.path.join(HERE, ".."))

from judge import features  # noqa: E402

BLOCK = 4096
SKIP = 77


class Report:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.prefix = ""  # the file system the checks run on

    def check(self, what, problems, note=""):
        what = self.prefix + what
        if problems:
            self.failed += 1
            shown = problems[:6] + (["... %d more" % (len(problems) - 6)] if len(problems) > 6 else [])
            print("FAIL %s: %s" % (what, "; ".join(shown)), flush=True)
        else:
            self.passed += 1
            print("PASS %s%s" % (what, (": " + note) if note else ""), flush=True)

    def skip(self, what, why):
        what = self.prefix + what
        self.skipped += 1
        print("SKIP %s: %s" % (what, why), flush=True)


# ---- block maps (FIEMAP) ---------------------------------------------------------------

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNKNOWN = 0x2
FIEMAP_EXTENT_DELALLOC = 0x4
FIEMAP_EXTENT_SHARED = 0x2000


def extents(path):
    """[(logical, physical, length, flags)] of the file, its dirty data flushed first."""
    out = []
    start = 0
    count = 256
    with open(path, "rb") as f:
        while True:
            buf = bytearray(32 + 56 * count)
            struct.pack_into("<QQIIII", buf, 0, start, (1 << 64) - 1 - start, FIEMAP_FLAG_SYNC, 0, count, 0)
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, buf)
            n = struct.unpack_from("<I", buf, 20)[0]
            last = False
            for i in range(n):
                lo, ph, ln, _, _, fl = struct.unpack_from("<QQQQQI", buf, 32 + 56 * i)
                out.append((lo, ph, ln, fl))
                last = bool(fl & FIEMAP_EXTENT_LAST)
            if n == 0 or last:
                return out
            start = out[-1][0] + out[-1][2]


def physical_blocks(path):
    """The physical blocks under the file (block numbers)."""
    s = set()
    for lo, ph, ln, fl in extents(path):
        if fl & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC):
            continue
        s.update(range(ph // BLOCK, (ph + ln + BLOCK - 1) // BLOCK))
    return s


def shared_with(out_path, input_blocks):
    """(bytes of out's whole blocks lying on input_blocks, of which in extents not flagged SHARED)."""
    on, unflagged = 0, 0
    for lo, ph, ln, fl in extents(out_path):
        if fl & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC) or ph % BLOCK or lo % BLOCK:
            continue
        k = sum(1 for b in range(ph // BLOCK, (ph + ln) // BLOCK) if b in input_blocks)
        on += k * BLOCK
        if k and not fl & FIEMAP_EXTENT_SHARED:
            unflagged += k * BLOCK
    return on, unflagged


# ---- zip records -------------------------------------------------------------------------

def records(path):
    """[(name, method, size, data_off)] of a zip, data offsets read from the local headers."""
    out = []
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for zi in z.infolist():
            f.seek(zi.header_offset)
            h = f.read(30)
            nl, xl = struct.unpack_from("<HH", h, 26)
            out.append((zi.filename, zi.compress_type, zi.file_size, zi.header_offset + 30 + nl + xl))
    return out


def is_zip(path):
    with open(path, "rb") as f:
        return f.read(4) == b"PK\x03\x04"


def data_records(path):
    return [r for r in records(path) if re.fullmatch(r"[^/]+/data/[^/]+", r[0])]


def shareable(path):
    """Bytes of a zip input tensorctl should share when every storage passes through unchanged:
    the whole blocks of every stored data record whose data is 64-byte aligned."""
    total = 0
    for name, method, size, off in data_records(path):
        if method != zipfile.ZIP_STORED or off % 64:
            continue
        head = (-off) % BLOCK
        if size >= head + BLOCK:
            total += (size - head) // BLOCK * BLOCK
    return total


# ---- inputs made here ------------------------------------------------------------------------

def aligned_zip(path, archive, recs):
    """A stored zip as torch lays it out, except that record i's data starts at phase[i] modulo
    4096 (an FB padding extra field, as torch's): recs = [(name, bytes or (size, seed), phase)]."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, data, phase in recs:
            zi = zipfile.ZipInfo(archive + "/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_STORED
            size = len(data) if isinstance(data, bytes) else data[0]
            z64 = size > (1 << 31)
            start = z.fp.tell() + 30 + len(zi.filename.encode()) + 4 + (20 if z64 else 0)
            pad = (phase - start) % BLOCK
            zi.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            with z.open(zi, "w", force_zip64=z64) as f:
                if isinstance(data, bytes):
                    f.write(data)
                else:
                    rng = random.Random(data[1])
                    left = size
                    while left:
                        k = min(left, 1 << 22)
                        f.write(rng.randbytes(k))
                        left -= k


def tensor_pickle(names_sizes, locations):
    """A state_dict pickle: name -> a float32 1-d tensor over storage key i (size bytes)."""
    from hostile import FALSE, PROTO, STOP, dict_of, op_global, op_int, op_str, op_tuple
    pairs = []
    for i, ((name, size), loc) in enumerate(zip(names_sizes, locations)):
        numel = size // 4
        pid = op_tuple([op_str("storage"), op_global("torch", "FloatStorage"), op_str(str(i)), op_str(loc),
                        op_int(numel)]) + b"Q"
        hooks = op_global("collections", "OrderedDict") + b")R"
        args = [pid, op_int(0), op_tuple([op_int(numel)]), op_tuple([op_int(1)]), FALSE, hooks]
        pairs.append((name, op_global("torch._utils", "_rebuild_tensor_v2") + op_tuple(args) + b"R"))
    return PROTO + dict_of(pairs) + STOP


def make_checkpoint(path, tensors, seed):
    """tensors: [(name, bytes, phase, location)], float32 each."""
    archive = os.path.splitext(os.path.basename(path))[0]
    pkl = tensor_pickle([(n, s) for n, s, _, _ in tensors], [loc for _, _, _, loc in tensors])
    recs = [("data.pkl", pkl, 0), ("byteorder", b"little", 0)]
    for i, (name, size, phase, loc) in enumerate(tensors):
        recs.append(("data/%d" % i, (size, seed * 1000 + i), phase))
    recs.append(("version", b"3\n", 0))
    aligned_zip(path, archive, recs)


MIB = 1 << 20
BIG = [("wte.weight", 60 * MIB, 64, "cuda:0"), ("h.0.attn.weight", 40 * MIB + 4, 1088, "cuda:0"),
       ("h.0.mlp.weight", 30 * MIB + 12, 4032, "cuda:0"), ("h.1.attn.weight", 25 * MIB, 0, "cpu"),
       ("h.1.mlp.weight", 20 * MIB + 400, 2048, "cuda:0"), ("ln_f.weight", 15 * MIB + 8, 3968, "cuda:0"),
       ("small.a", BLOCK + 4, 4032, "cuda:0"), ("small.b", BLOCK * 3, 512, "cuda:0"), ("tiny", 12, 448, "cuda:0")]


def make_set(folder):
    """pytorch_model.bin.index.json and three shards (one in a subfolder)."""
    shards = [("pytorch_model-00001-of-00003.bin", [("a.weight", 30 * MIB + 4, 192, "cuda:0"),
                                                      ("a.bias", 8192, 0, "cuda:0")]),
              ("pytorch_model-00002-of-00003.bin", [("b.weight", 20 * MIB, 3008, "cuda:0"),
                                                      ("b.bias", 4100, 64, "cuda:0")]),
              ("sub/pytorch_model-00003-of-00003.bin", [("c.weight", 12 * MIB + 20, 1024, "cuda:0")])]
    wm, total = {}, 0
    for k, (file, tensors) in enumerate(shards):
        p = os.path.join(folder, file)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        make_checkpoint(p, tensors, 50 + k)
        for name, size, _, _ in tensors:
            wm[name] = file
            total += size
    index = os.path.join(folder, "pytorch_model.bin.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
    return index, [os.path.join(folder, s) for s, _ in shards]


# ---- running ----------------------------------------------------------------------------

def run(cmd, timeout=600, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out after %ds" % timeout


SHARING = re.compile(r"^tensorctl: (.*): (\d+) bytes: (\d+) shared with the input \(.*\), (\d+) copied, "
                     r"(\d+) written$", re.M)


def sharing_line(err):
    m = SHARING.search(err)
    if not m:
        return None
    return {"bytes": int(m.group(2)), "shared": int(m.group(3)), "copied": int(m.group(4)),
            "written": int(m.group(5))}


def check_output(rep, what, err, outs, inputs, expect_shared, input_blocks, at_least=False, flagged=True):
    """outs: the output files (a set: its shards and index); inputs: theirs. at_least: -v's shared
    count may be short of what lies on the input's blocks (copy_file_range, where a clone was
    refused and the file system copies on its own, may share blocks itself: that is counted as
    copied). flagged: those blocks must still
    be shared (not when the input is gone: --in-place)."""
    problems = []
    v = sharing_line(err)
    size = sum(os.path.getsize(o) for o in outs)
    if v is None:
        rep.check(what + " -v", ["no 'N bytes: S shared ... C copied, W written' line: %s" % err.strip()[-300:]])
        return
    if v["bytes"] != size or v["shared"] + v["copied"] + v["written"] != size:
        problems.append("-v says %(bytes)d bytes = %(shared)d shared + %(copied)d copied + %(written)d written"
                        % v + ", the output is %d bytes" % size)
    on, unflagged = 0, 0
    for o in outs:
        a, b = shared_with(o, input_blocks)
        on += a
        unflagged += b
    if on != v["shared"] and not (at_least and on > v["shared"]):
        problems.append("-v says %d bytes shared, but %d bytes of the output lie on the input's blocks"
                        % (v["shared"], on))
    if unflagged and flagged:
        problems.append("%d bytes on the input's blocks in extents not flagged shared" % unflagged)
    if expect_shared is not None and v["shared"] != expect_shared:
        problems.append("%d bytes shared, expected %d (every whole block of the unchanged records)"
                        % (v["shared"], expect_shared))
    for o in outs:
        if not o.endswith(".json"):
            for name, method, rsize, off in records(o):
                if off % 64:
                    problems.append("%s: %s data at %d, not 64-byte aligned" % (os.path.basename(o), name, off))
            with zipfile.ZipFile(o) as z:
                bad = z.testzip()
            if bad:
                problems.append("%s: zipfile finds a bad CRC-32 in %s" % (os.path.basename(o), bad))
            if shutil.which("unzip"):
                rc, uout, uerr = run(["unzip", "-tq", o])
                if rc != 0:
                    problems.append("unzip -t %s: exit %d %s" % (os.path.basename(o), rc, (uout + uerr).strip()[-200:]))
    rep.check(what, problems, "%(bytes)d bytes: %(shared)d shared, %(copied)d copied, %(written)d written" % v)


def inspect(tool, path):
    rc, out, err = run([tool, "inspect", "--json", path])
    try:
        return json.loads(out)
    except ValueError:
        return None


def check_file(a, rep, path, work, pairs):
    base = os.path.basename(path)
    info = inspect(a.tensorctl, path) or {}
    if info.get("dangerous_globals"):
        rep.skip(base, "tensorctl refuses it (dangerous globals); nothing to share")
        return
    extra = ["--safe-globals", ",".join(info["unsafe_globals"])] if info.get("unsafe_globals") else []
    locs = sorted(set(t.get("device") for t in info.get("tensors") or [] if t.get("device")))
    frm = locs[0] if locs else "cuda:0"
    to = "cpu" if frm != "cpu" else "cuda:0"
    zipped = is_zip(path)
    expect = shareable(path) if zipped else None
    blocks = physical_blocks(path)
    stem, ext = os.path.splitext(base)
    variants = [("to-cpu", ["to-cpu"], {"device": "cpu"}, expect),
                ("to-cuda", ["to-cuda", "--device", "cuda:1"], {"device": "cuda:1"}, expect),
                ("map", ["to-cpu", "--map", "%s=%s" % (frm, to)], {"maps": {frm: to}}, expect),
                ("verify-crc", ["to-cpu", "--verify-crc"], {"device": "cpu"}, expect),
                ("convert", ["convert"], {"device": "cpu"}, expect)]
    if base == "big.pt":
        variants.append(("bfloat16", ["to-cpu", "--dtype", "bfloat16"], {"device": "cpu", "dtype": "bfloat16"}, 0))
    for label, args, kw, want in variants:
        out = os.path.join(work, "%s.%s%s" % (stem, label, ext if ext in (".pt", ".bin", ".pth", ".ckpt") else ".pt"))
        cmd = [a.tensorctl] + args + ["-v", "-f"] + extra + [path] + (["-o", out] if args[0] != "convert" else [out])
        t0 = time.time()
        rc, _, err = run(cmd)
        dt = time.time() - t0
        what = "%s %s" % (base, label)
        if rc != 0 or not os.path.exists(out):
            rep.check(what, ["exit %d: %s" % (rc, err.strip()[-300:])])
            continue
        check_output(rep, what + " (%.2fs)" % dt, err, [out], [path], want, blocks)
        pairs.append({"kind": "file", "in": path, "out": out, "kw": kw, "what": what})


def check_set(a, rep, work, pairs):
    index, shards = make_set(os.path.join(work, "set"))
    blocks = set()
    for s in shards:
        blocks |= physical_blocks(s)
    expect = sum(shareable(s) for s in shards)
    # rewritten shard by shard, and re-sharded (pt -> pt), every storage passing through
    for label, cmd, outdir in (("set to-cpu", ["to-cpu", "-v", index, "-o"], os.path.join(work, "set-cpu")),
                               ("set convert", ["convert", "-v", "--max-shard-size", "40MB", index],
                                os.path.join(work, "set-conv"))):
        rc, _, err = run([a.tensorctl] + cmd + [outdir + ("/pytorch_model.bin.index.json" if "convert" in label else "")])
        if rc != 0:
            rep.check(label, ["exit %d: %s" % (rc, err.strip()[-300:])])
            continue
        outs = []
        for root, _, files in os.walk(outdir):
            outs += [os.path.join(root, f) for f in files]
        check_output(rep, label, err, sorted(outs), shards, expect, blocks)
        out_shards = sorted(o for o in outs if not o.endswith(".json"))
        if label == "set to-cpu":
            for s in shards:
                o = os.path.join(outdir, os.path.relpath(s, os.path.dirname(index)))
                pairs.append({"kind": "file", "in": s, "out": o, "kw": {"device": "cpu"}, "what": label + " " + os.path.basename(s)})
        else:
            pairs.append({"kind": "set", "in": shards, "out": out_shards, "what": label})


def check_refused(a, rep, big, work, pairs):
    """The first clone refused (EOPNOTSUPP, injected): that record is copied, the rest shared."""
    if not a.shim:
        rep.skip("big.pt to-cpu, first clone refused", "no fault injection shim given")
        return
    first = next(((size - (-off) % BLOCK) // BLOCK * BLOCK for name, method, size, off in data_records(big)
                  if method == zipfile.ZIP_STORED and off % 64 == 0 and size >= (-off) % BLOCK + BLOCK), 0)
    out = os.path.join(work, "big.refused.pt")
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.shim), TC_FAULT_CALL="ioctl", TC_FAULT_NTH="1",
               TC_FAULT_ERRNO="95")
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    rc, _, err = run([a.tensorctl, "to-cpu", "-v", "-f", big, "-o", out], env=env)
    what = "big.pt to-cpu, first clone refused"
    if rc != 0:
        rep.check(what, ["exit %d: %s" % (rc, err.strip()[-300:])])
        return
    check_output(rep, what, err, [out], [big], shareable(big) - first, physical_blocks(big), at_least=True)
    pairs.append({"kind": "file", "in": big, "out": out, "kw": {"device": "cpu"}, "what": what})


def check_in_place(a, rep, big, work, pairs):
    """--in-place: the new file shares the blocks of the one it replaces."""
    path = os.path.join(work, "inplace.pt")
    with open(big, "rb") as f, open(path, "wb") as g:
        shutil.copyfileobj(f, g, 1 << 22)  # a copy of its own, not sharing big.pt's blocks
    expect, blocks = shareable(path), physical_blocks(path)
    rc, _, err = run([a.tensorctl, "to-cpu", "-v", "--in-place", path])
    what = "big.pt to-cpu --in-place"
    if rc != 0:
        rep.check(what, ["exit %d: %s" % (rc, err.strip()[-300:])])
        return
    # the old file is gone: its blocks are the new one's alone (btrfs no longer flags them shared)
    check_output(rep, what, err, [path], [], expect, blocks, flagged=False)
    pairs.append({"kind": "file", "in": big, "out": path, "kw": {"device": "cpu"}, "what": what})


def make_dcp(folder, phases, rows=512, cols=1024, seed=70):
    """A distributed checkpoint made byte by byte (no torch): tensor 'w' (rows * len(phases), cols) of
    float32 split by rows into one chunk per phase, each chunk's torch.save archive in one .distcp
    file with its data at that phase modulo 4096 in the file, and a pickled item 'step'.
    Also writes ref.pt beside the folder: 'w' whole, the bytes torch must find in the output.
    Returns (folder, ref.pt, [(absolute data offset in the .distcp file, size)] per chunk)."""
    from hostile import dcp, dict_of, state_dict, tensor
    size = rows * cols * 4
    blobs, datas = [], []
    tmp = os.path.join(folder + ".blob")
    for k, phase in enumerate(phases):
        pkl = state_dict(tensor(numel=rows * cols, shape=(rows, cols), stride=(cols, 1)))
        aligned_zip(tmp, "archive", [("data.pkl", pkl, 0), ("byteorder", b"little", 0),
                                     ("data/0", (size, seed + k), (phase - sum(map(len, blobs))) % BLOCK),
                                     ("version", b"3\n", 0)])
        with open(tmp, "rb") as f:
            blobs.append(f.read())
        datas.append(next(off for name, _, _, off in records(tmp) if name.endswith("/data/0")))
        os.unlink(tmp)
    chunks = tuple(((k * rows, 0), (rows, cols)) for k in range(len(phases)))
    files = dcp(shape=(rows * len(phases), cols), chunks=chunks, blobs=blobs)
    os.makedirs(folder)
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    where, at = [], 0
    for b, off in zip(blobs, datas):
        where.append((at + off, size))
        at += len(b)
    whole = b"".join(blobs[k][datas[k]:datas[k] + size] for k in range(len(phases)))
    ref = folder + ".ref.pt"
    pkl = state_dict(dict_of([("w", tensor(numel=len(whole) // 4, shape=(rows * len(phases), cols),
                                           stride=(cols, 1)))]))
    aligned_zip(ref, "ref", [("data.pkl", pkl, 0), ("byteorder", b"little", 0), ("data/0", whole, 0),
                             ("version", b"3\n", 0)])
    return folder, ref, where


def check_dcp(a, rep, mnt, work, pairs):
    """consolidate to .pt: the tensor starts at its first chunk's offset within a block, so that chunk's
    whole blocks are shared; a later chunk too, where it lies at the same offset within a block as
    its place in the output (the chunks of one tensor lie end to end there)."""
    folder, ref, where = make_dcp(os.path.join(mnt, "in", "dcp"), (1088, 64, 1088))
    blocks = set()
    for f in os.listdir(folder):
        blocks |= physical_blocks(os.path.join(folder, f))
    expect, out_at, aligned = 0, where[0][0], []  # each chunk's offset in the output, modulo a block
    for at, size in where:
        aligned.append((at - out_at) % BLOCK == 0)
        if aligned[-1]:
            head = (-at) % BLOCK
            expect += (size - head) // BLOCK * BLOCK
        out_at += size
    if aligned != [True, False, True]:
        rep.check("dcp made", ["its chunks lie at %s modulo 4096: not the layout this check needs" %
                               [at % BLOCK for at, _ in where]])
        return
    out = os.path.join(work, "dcp.pt")
    rc, _, err = run([a.tensorctl, "consolidate", "-v", "-f", folder, "-o", out])
    what = "dcp consolidate"
    if rc != 0:
        rep.check(what, ["exit %d: %s" % (rc, err.strip()[-300:])])
        return
    check_output(rep, what, err, [out], [os.path.join(folder, "__0_0.distcp")], expect, blocks)
    pairs.append({"kind": "set", "in": [ref], "out": [out], "what": what})


def check_unit(a, rep, mnt):
    if not a.unit:
        rep.skip("unit test of the transfer", "no test_xfer (criterion not found)")
        return
    tmp = os.path.join(mnt, "unit-tmp")
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, TMPDIR=tmp, TC_EXPECT_REFLINK="1")
    rc, out, err = run([a.unit, "--filter", "xfer/shares_whole_blocks_where_the_file_system_clones"], env=env)
    rep.check("unit test of the transfer, its files here", [] if rc == 0 else ["exit %d: %s" % (rc, (out + err).strip()[-500:])])


def check_torch(a, rep, work, pairs):
    if not pairs:
        return  # the check made no output (unit, or every rewrite refused: failures of their own)
    if not a.run_with_torch:
        rep.skip("torch loads the outputs", "no run_with_torch.sh given")
        return
    listing = os.path.join(work, "pairs.json")
    with open(listing, "w") as f:
        json.dump(pairs, f)
    p = subprocess.run(["sh", a.run_with_torch, os.path.abspath(__file__), "torch", listing])
    if p.returncode == SKIP:
        rep.skip("torch loads the outputs", "no Python with torch here")
    else:
        rep.check("torch loads the outputs bit for bit (%d outputs)" % len(pairs),
                  [] if p.returncode == 0 else ["see the lines above (exit %d)" % p.returncode])


# What run checks on each file system (--only; all by default), in this order; torch then loads
# every output they made.
CHECKS = ["files", "refused", "in-place", "set", "dcp", "unit"]
MKFS = {"xfs": ["mkfs.xfs", "-q", "-f", "-m", "reflink=1"], "btrfs": ["mkfs.btrfs", "-q", "-f"]}


class Mounted:
    """A sparse image of file system fs, loop-mounted; unmounted and removed on exit, whatever happens."""

    def __init__(self, size, fs):
        self.dir = tempfile.mkdtemp(prefix="tensorctl-reflink-")
        self.img = os.path.join(self.dir, fs + ".img")
        self.mnt = os.path.join(self.dir, "mnt")
        self.size = size
        self.fs = fs
        self.mounted = False

    def __enter__(self):
        try:
            os.mkdir(self.mnt)
            with open(self.img, "wb") as f:
                f.truncate(self.size)
            rc, out, err = run(MKFS[self.fs] + [self.img])
            if rc != 0:
                raise RuntimeError("skip: %s failed: %s" % (MKFS[self.fs][0], (out + err).strip()))
            rc, out, err = run(["mount", "-o", "loop", self.img, self.mnt])
            if rc != 0:
                raise RuntimeError("skip: cannot loop-mount an image here (no loop device?): %s" % (out + err).strip())
            self.mounted = True
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        if self.mounted:
            for i in range(10):
                if run(["umount", self.mnt])[0] == 0:
                    self.mounted = False
                    break
                time.sleep(0.5)
            if self.mounted:
                run(["umount", "-l", self.mnt])
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


def run_on(a, rep, fs):
    """The checks of a.only on an image of file system fs; the inputs they judge copied and made
    there as the first check needs them."""
    rep.prefix = fs + ": "
    with Mounted(2 << 30, fs) as m:
        work = os.path.join(m.mnt, "work")
        os.makedirs(work)
        os.makedirs(os.path.join(m.mnt, "in"))  # the inputs, copied and made
        print("# %s image mounted at %s" % (" ".join(MKFS[fs][0:1] + MKFS[fs][3:]), m.mnt), flush=True)
        made = {}

        def big():
            """in/big.pt, the ~200 MB checkpoint made byte by byte."""
            if "big" not in made:
                made["big"] = os.path.join(m.mnt, "in", "big.pt")
                make_checkpoint(made["big"], BIG, 1)
            return made["big"]

        def inputs():
            """FILE... copied in, then big.pt."""
            out = []
            for f in a.files:
                dst = os.path.join(m.mnt, "in", os.path.basename(os.path.dirname(f)) + "-" + os.path.basename(f))
                shutil.copyfile(f, dst)
                out.append(dst)
            return out + [big()]

        pairs = []
        checks = {
            "files": lambda: [check_file(a, rep, path, work, pairs) for path in inputs()],
            "refused": lambda: check_refused(a, rep, big(), work, pairs),
            "in-place": lambda: check_in_place(a, rep, big(), work, pairs),
            "set": lambda: check_set(a, rep, work, pairs),
            "dcp": lambda: check_dcp(a, rep, m.mnt, work, pairs),
            "unit": lambda: check_unit(a, rep, m.mnt),
        }
        for name in a.only:
            print("# %s: %s" % (fs, name), flush=True)
            checks[name]()
        for p in pairs:
            p["what"] = rep.prefix + p["what"]
        check_torch(a, rep, work, pairs)
        if a.keep:
            input("outputs under %s; press Enter to unmount " % work)


def main_run(a):
    if os.geteuid() != 0:
        print("check_reflink: skipped: making and mounting an XFS image needs root")
        return SKIP
    if "xfs" in a.fs and not shutil.which("mkfs.xfs"):
        print("check_reflink: skipped: no mkfs.xfs (Debian: apt-get install xfsprogs)")
        return SKIP
    if not os.path.exists(a.tensorctl):
        print("check_reflink: %s: no such file" % a.tensorctl)
        return 2
    a.tensorctl = os.path.abspath(a.tensorctl)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rep = Report()
    for fs in a.fs:
        if fs != "xfs" and not shutil.which(MKFS[fs][0]):
            if a.fs == [fs]:
                print("check_reflink: skipped: no %s here (Debian: apt-get install btrfs-progs)" % MKFS[fs][0])
                return SKIP
            rep.prefix = ""
            rep.skip(fs, "no %s here (Debian: apt-get install btrfs-progs); XFS only" % MKFS[fs][0])
            continue
        try:
            run_on(a, rep, fs)
        except RuntimeError as e:
            if not str(e).startswith("skip: "):
                raise
            if fs == "xfs" or a.fs == [fs]:
                print("check_reflink: skipped: %s" % str(e)[6:])
                return SKIP
            rep.prefix = ""
            rep.skip(fs, str(e)[6:])
    print("%d passed, %d failed, %d skipped" % (rep.passed, rep.failed, rep.skipped))
    return 1 if rep.failed else 0


# ---- the torch half ------------------------------------------------------------------------

def main_torch(listing):
    import torch_verify
    from torch_verify import torch
    if torch is None:
        return SKIP
    rep = Report()
    tv = "torch " + torch.__version__
    for p in json.load(open(listing)):
        what = "%s: torch (%s)" % (p["what"], tv)
        ins = p["in"] if p["kind"] == "set" else [p["in"]]
        try:
            for i in ins:
                torch_verify.load_checkpoint(i)
        except Exception as e:  # noqa: BLE001
            rep.skip(what, "%s cannot load the input: %s: %s" % (tv, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            continue
        try:
            if p["kind"] == "file":
                problems, notes = torch_verify.verify_output(p["in"], p["out"], **p["kw"])
            else:
                problems, notes = compare_sets(torch_verify, p["in"], p["out"]), []
        except Exception as e:  # noqa: BLE001
            problems, notes = ["judge error %s: %s" % (type(e).__name__, e)], []
        rep.check(what, problems)
    print("%d passed, %d failed, %d skipped" % (rep.passed, rep.failed, rep.skipped))
    return 1 if rep.failed else 0


def compare_sets(tv, ins, outs):
    """The tensors of a re-sharded set, by name, equal bit for bit (weights_only=True loads)."""
    def tensors(files):
        d = {}
        for f in files:
            for k, t in tv.flatten(tv.load_checkpoint(f).obj).items():
                d["/".join(k)] = t
            if tv._torch_load_has("weights_only"):
                tv.torch.load(f, map_location="cpu", weights_only=True)
        return d
    a, b = tensors(ins), tensors(outs)
    problems = []
    if sorted(a) != sorted(b):
        problems.append("names differ: %s vs %s" % (sorted(a)[:5], sorted(b)[:5]))
    for k in a:
        if k in b and (a[k].dtype != b[k].dtype or tv.tensor_bytes(a[k]) != tv.tensor_bytes(b[k])):
            problems.append("%s differs" % k)
    return problems


def main(argv=None):
    only, argv = features(sys.argv[1:] if argv is None else argv, CHECKS)
    if argv[:1] == ["torch"] and len(argv) == 2:
        return main_torch(argv[1])
    if argv[:1] != ["run"]:
        print(__doc__)
        return 2
    ap = argparse.ArgumentParser(prog="check_reflink.py run")
    ap.add_argument("--tensorctl", required=True)
    ap.add_argument("--unit", help="tests/unit/test_xfer of the build")
    ap.add_argument("--run-with-torch", help="tests/run_with_torch.sh")
    ap.add_argument("--shim", help="the fault injection shim (tests/faultinject), to refuse a clone")
    ap.add_argument("--keep", action="store_true", help="wait before unmounting (to look around)")
    ap.add_argument("--fs", default="xfs,btrfs", help="the file systems, comma-separated (xfs,btrfs)")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args(argv[1:])
    a.fs, a.only = a.fs.split(","), only
    bad = [x for x in a.fs if x not in MKFS]
    if bad:
        ap.error("unknown file system: %s" % ", ".join(bad))
    return main_run(a)


if __name__ == "__main__":
    sys.exit(main())
