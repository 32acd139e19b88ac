#!/usr/bin/env python3
"""Every --dtype target, --keep and --only, judged by real torch.

usage: check_cast_all.py TENSORCTL OUTDIR FILE...   (run under a python with torch)
For each FILE and each target dtype, every floating-point tensor of the output must
equal torch's own input.to(dtype) bit for bit and every other tensor the input; the
output must load with weights_only=True where this torch's loader allows it; shared
storages stay shared. float8 targets and _rebuild_tensor_v3 inputs need torch >= 2.1
and are skipped on older torch. Prints 'N passed, N failed, N skipped'.
A missing FILE fails; so does a run in which every check was skipped. Exit 77 only when
torch cannot be imported.
"""
import os
import subprocess
import sys
import warnings

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means this interpreter cannot judge
    print("SKIP: torch is not importable by %s (%s)" % (sys.executable, e))
    sys.exit(77)

warnings.filterwarnings("ignore")
NEW = torch.__version__ >= "2.1"
TARGETS = ["float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"]


def load(path, **kw):
    if torch.__version__ >= "2":
        kw.setdefault("weights_only", False)
    return torch.load(path, **kw)


def flat(x, prefix=""):
    if isinstance(x, torch.Tensor):
        yield prefix, x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from flat(v, "%s.%s" % (prefix, k) if prefix else str(k))
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from flat(v, "%s.%d" % (prefix, i) if prefix else str(i))


def raw(t):
    t = t.contiguous()
    return t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


# torch's own casts give different NaN bits for these pairs in its scalar tail
# (the last n % vector-width elements, so tensors under 8-16 elements) than in
# its vector loop; tensorctl follows the vector loop (see kernels/cast.h).
NAN_LOOSE = {(torch.float16, torch.float32), (torch.float16, torch.float64), (torch.float64, torch.bfloat16)}


def same(x, y, want_stride, src_dtype=None):
    if x.dtype != y.dtype or x.shape != y.shape or y.stride() != want_stride:
        return False
    if torch.equal(raw(x), raw(y)):
        return True
    if (src_dtype, x.dtype) in NAN_LOOSE:
        xs, ys = x.contiguous().reshape(-1), y.contiguous().reshape(-1)
        differ = raw(xs).view(-1, x.element_size()).ne(raw(ys).view(-1, y.element_size())).any(1)
        return bool((xs.isnan() & ys.isnan())[differ].all())
    return False


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    tool, outdir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(outdir, exist_ok=True)
    passed = failed = skipped = 0

    def report(ok, what, why=""):
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        print("%s %s (torch %s)%s" % ("ok  " if ok else "FAIL", what, torch.__version__, (": " + why) if why else ""))

    for f in files:
        if not os.path.isfile(f):
            report(False, os.path.basename(f), "no such file: %s" % f)
            continue
        try:
            a = dict(flat(load(f, map_location="cpu")))
        except Exception as e:  # this torch cannot read the input at all (v3 dtypes on 1.x)
            skipped += 1
            print("SKIP %s: torch %s cannot load it (%s)" % (os.path.basename(f), torch.__version__, type(e).__name__))
            continue
        for dt in TARGETS:
            what = "%s --dtype %s" % (os.path.basename(f), dt)
            if dt.startswith("float8") and not NEW:
                skipped += 1
                print("SKIP %s: float8 needs torch >= 2.1" % what)
                continue
            out = os.path.join(outdir, "%s.%s.pt" % (os.path.basename(f), dt))
            run = subprocess.run([tool, "to-cpu", "-q", "-f", f, "-o", out, "--dtype", dt], capture_output=True, text=True)
            if run.returncode:
                report(False, what, "exit %d: %s" % (run.returncode, run.stderr.strip()))
                continue
            T = getattr(torch, dt)
            b = dict(flat(load(out)))
            bad = [n for n, x in a.items()
                   if n not in b or not same(x.to(T) if x.is_floating_point() else x, b[n], x.stride(), x.dtype)]
            # views of one storage in the input still share one in the output
            def ptr(t):
                return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()
            names = sorted(a)
            for i, n in enumerate(names):
                for m in names[i + 1:]:
                    if a[n].numel() and a[m].numel() and (ptr(a[n]) == ptr(a[m])) != (ptr(b[n]) == ptr(b[m])):
                        bad.append("sharing %s/%s" % (n, m))
            if torch.__version__ >= "2":
                try:
                    torch.load(out, weights_only=True)
                except Exception as e:
                    bad.append("weights_only load: %s" % str(e).splitlines()[0][:120])
            report(not bad, what, ", ".join(bad[:8]))
        # --keep and --only pick by name; a pattern that splits a shared storage is refused
        out = os.path.join(outdir, "%s.keep.pt" % os.path.basename(f))
        floats = sorted(n for n, x in a.items() if x.is_floating_point() and x.dtype != torch.float16)
        if floats:
            keep = floats[0]
            run = subprocess.run([tool, "to-cpu", "-q", "-f", f, "-o", out, "--dtype", "float16", "--keep", keep],
                                 capture_output=True, text=True)
            shared = [n for n in floats[1:] if a[n].numel() and a[keep].numel() and
                      a[n].storage().data_ptr() == a[keep].storage().data_ptr()]
            if shared:
                report(run.returncode == 2 and keep in run.stderr and not os.path.exists(out),
                       "%s --keep %s splits a storage: refused" % (os.path.basename(f), keep), run.stderr.strip())
            else:
                b = dict(flat(load(out))) if run.returncode == 0 else {}
                ok = run.returncode == 0 and same(a[keep], b[keep], a[keep].stride()) and all(
                    b[n].dtype == torch.float16 for n in floats[1:])
                report(ok, "%s --keep %s" % (os.path.basename(f), keep), run.stderr.strip())
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if passed + failed == 0:
        print("FAIL: no check ran (every input or target skipped)")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
