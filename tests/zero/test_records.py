#!/usr/bin/env python3
"""consolidate of a ZeRO-2 checkpoint large enough that each rank's slice is copied as it lies:
the output's records and their CRC-32s, judged with real torch and Python's zipfile.

    test_records.py TENSORCTL OUTDIR

The checkpoint is written by bench/make_bench_zero.py (as DeepSpeed 0.19.8 writes ZeRO-2 files: each
rank's slice of a group's flat fp32 buffer is a view of its partition, so the last rank's record
holds the padding its tensor leaves out) at shapes whose groups do not divide evenly: the last
rank's slices are a few elements short of their records, and a parameter straddles the ranks.
  * .pt: loads with torch.load(weights_only=True); every parameter equals the converter's rule (the
    ranks' slices concatenated, narrowed in param_shapes order); the parameters of a group are
    views into one storage of the concatenated slices, as in DeepSpeed's own state_dict; every
    record's CRC-32 is right (zipfile.testzip);
  * the same with --dtype bfloat16 (the CRC-32s are computed, not carried over);
  * .safetensors: the same values, each parameter read from its own place in the file;
  * a byte of a rank's slice changed in a copy (its record's CRC-32 left as it was): consolidate,
    which carries the records' CRC-32s over, writes an output whose record fails its CRC-32, so
    `tensorctl test` and zipfile find the damage; it is not hidden behind a fresh CRC-32.
One line per check, then `N passed, M failed`; exit 77 when torch cannot be imported.
"""
import glob
import os
import shutil
import struct
import subprocess
import sys
import warnings
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch_verify  # noqa: E402
from st_read import read_raw  # noqa: E402

BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, BENCH)
import make_bench_zero  # noqa: E402,F401  (its stand-ins load the optimizer files it writes)

warnings.filterwarnings("ignore")
SHAPES = ["--layers", "1", "--dim", "513", "--vocab", "1000", "--no-moments"]  # groups of 776169 and 1539


def expected(case):
    """name -> tensor by the converter's rule, and the group sizes, from the files themselves."""
    step = os.path.join(case, open(os.path.join(case, "latest")).read().strip())
    m = torch.load(glob.glob(os.path.join(step, "mp_rank_*_model_states.pt"))[0], map_location="cpu",
                   weights_only=True)
    opt = [torch.load(f, map_location="cpu", weights_only=False)["optimizer_state_dict"]
           for f in sorted(glob.glob(os.path.join(step, "*_optim_states.pt")))]
    want, sizes = {}, []
    for g, shapes in enumerate(m["param_shapes"]):
        flat = torch.cat([o["single_partition_of_fp32_groups"][g] for o in opt])
        sizes.append(flat.numel())
        off = 0
        for k, s in shapes.items():
            want[k] = flat[off:off + s.numel()].view(s)
            off += s.numel()
    return want, sizes, opt


def record_start(path, name_end):
    """Byte offset of the data of the largest record of path whose name ends with name_end."""
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if i.filename.endswith(name_end) or name_end in i.filename),
                   key=lambda i: i.file_size)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        hdr = f.read(30)
    n, e = struct.unpack("<HH", hdr[26:30])
    return info.header_offset + 30 + n + e, info.file_size


def consolidated(tool, case, out, *args):
    """consolidate CASE -o OUT ARGS: the problems (its exit, a record failing its CRC-32) and the state_dict."""
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", out, *args)
    if rc:
        return ["consolidate %s exited %d: %s" % (" ".join(args), rc, err.strip())], None
    with zipfile.ZipFile(out) as z:
        badrec = z.testzip()
    return ["record %s fails its CRC-32" % badrec] if badrec else [], torch_verify.load_weights_only(out)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool, base = sys.argv[1:]
    out = out_dir(base, torch)
    rep = Report()
    case = os.path.join(out, "padded")
    shutil.rmtree(case, ignore_errors=True)
    gen = subprocess.run([sys.executable, os.path.join(BENCH, "make_bench_zero.py"), case] + SHAPES,
                         capture_output=True, text=True)
    if not rep.check("make_bench_zero.py writes the checkpoint",
                     ["exit %d: %s" % (gen.returncode, gen.stderr.strip()[-400:])] if gen.returncode else []):
        return rep.finish()
    want, sizes, opt = expected(case)
    lean = [[t.numel() for t in o["single_partition_of_fp32_groups"]] for o in opt]
    rep.check("the last rank's slices leave padding out of their records (the case this test is for)",
              [] if any(o["group_paddings"][g] for o in opt for g in range(len(sizes))) and
              lean[0][0] * 4 >= 1 << 20 else ["no padding, or slices under 1 MiB: %s" % lean])

    problems, sd = consolidated(tool, case, os.path.join(out, "padded.pt"))
    if sd is not None:
        for k, w in want.items():
            if k not in sd or torch_verify.tensor_bytes(sd[k]) != torch_verify.tensor_bytes(w.contiguous()):
                problems.append("%s differs from the concatenated slices" % k)
        step = os.path.join(case, "global_step1")
        m = torch.load(os.path.join(step, "mp_rank_00_model_states.pt"), map_location="cpu", weights_only=True)
        for g, shapes in enumerate(m["param_shapes"]):
            st = {(torch_verify.storage_ptr(sd[k]), torch_verify.storage_nbytes(sd[k])) for k in shapes}
            if len(st) != 1 or next(iter(st))[1] != sizes[g] * 4:
                problems.append("group %d: storages %s, not one of %d bytes" % (g, sorted(st), sizes[g] * 4))
    rep.check(".pt: every parameter right, one storage per group, every record's CRC-32 right", problems)

    problems, sd = consolidated(tool, case, os.path.join(out, "padded.bf16.pt"), "--dtype", "bfloat16")
    if sd is not None:
        problems += ["%s is not the bfloat16 cast" % k for k, w in want.items()
                     if not torch.equal(sd[k], w.to(torch.bfloat16))]
    rep.check("--dtype bfloat16: every parameter the cast, every record's CRC-32 right", problems)

    stf = os.path.join(out, "padded.safetensors")
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", stf)
    problems = ["consolidate exited %d: %s" % (rc, err.strip())] if rc else []
    if not rc:
        hdr, data = read_raw(stf)
        for k, w in want.items():
            if k not in hdr:
                problems.append("%s missing" % k)
                continue
            a, b = hdr[k]["data_offsets"]
            if data[a:b] != torch_verify.tensor_bytes(w.contiguous()):
                problems.append("%s differs" % k)
    rep.check(".safetensors: every parameter from its place in its group", problems)

    bad = os.path.join(out, "damaged")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(case, bad)
    victim = os.path.join(bad, "global_step1", "zero_pp_rank_1_mp_rank_00_optim_states.pt")
    at, size = record_start(victim, "/data/")
    with open(victim, "r+b") as f:
        f.seek(at + size // 2)
        b = f.read(1)
        f.seek(at + size // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    dp = os.path.join(out, "damaged.pt")
    rc, _, err = run(tool, "consolidate", "-q", bad, "-o", dp)
    problems = ["consolidate exited %d: %s" % (rc, err.strip())] if rc else []
    if not rc:
        with zipfile.ZipFile(dp) as z:
            if not z.testzip():
                problems.append("every record of the output passes its CRC-32: the damage is hidden")
        trc, _, terr = run(tool, "test", dp)
        if not trc or "CRC-32" not in terr:
            problems.append("tensorctl test exited %d: %s" % (trc, terr.strip()))
    rep.check("a damaged slice: the output's record fails the CRC-32 the input gave it", problems)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
