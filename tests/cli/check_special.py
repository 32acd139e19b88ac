#!/usr/bin/env python3
"""Quantized, sparse and meta tensors survive to-cpu and --dtype in real torch.

usage: check_special.py TENSORCTL SAMPLE OUTDIR   (run under a python with torch)
torch_verify's generic comparison does not cover these layouts; this checks them
with torch's own accessors. Prints 'N passed, N failed'. A missing SAMPLE fails; exit 77 only
when torch cannot be imported.
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


def load(path, **kw):
    if torch.__version__ >= "2":
        kw.setdefault("weights_only", False)
    return torch.load(path, **kw)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    tool, sample, outdir = sys.argv[1:4]
    if not os.path.isfile(sample):
        print("FAIL: no such sample: %s" % sample)
        return 1
    os.makedirs(outdir, exist_ok=True)
    a = load(sample, map_location="cpu")
    passed = failed = 0
    for label, extra, dt in [("to-cpu", [], None), ("bfloat16", ["--dtype", "bfloat16"], torch.bfloat16),
                             ("float16", ["--dtype", "float16"], torch.float16)]:
        out = os.path.join(outdir, "special-%s.pt" % label)
        run = subprocess.run([tool, "to-cpu", "-q", "-f", sample, "-o", out] + extra, capture_output=True, text=True)
        problems = []
        if run.returncode != 0:
            problems.append("exit %d: %s" % (run.returncode, run.stderr.strip()))
        else:
            b = load(out)  # no map_location: everything must be on the cpu
            want = dt or torch.float32
            if not (torch.equal(a["q"].int_repr(), b["q"].int_repr()) and a["q"].q_scale() == b["q"].q_scale()
                    and a["q"].q_zero_point() == b["q"].q_zero_point()):
                problems.append("per-tensor quantized tensor changed")
            if not (torch.equal(a["qc"].int_repr(), b["qc"].int_repr())
                    and torch.equal(a["qc"].q_per_channel_scales(), b["qc"].q_per_channel_scales())
                    and torch.equal(a["qc"].q_per_channel_zero_points(), b["qc"].q_per_channel_zero_points())):
                problems.append("per-channel quantized tensor or its scales changed")
            if b["coo"].dtype != want or not torch.equal(a["coo"].to_dense().to(want), b["coo"].to_dense()):
                problems.append("sparse tensor is %s, not %s(input)" % (b["coo"].dtype, want))
            if not (b["meta"].is_meta and b["meta"].shape == a["meta"].shape):
                problems.append("meta tensor changed")
            if b["dense"].dtype != want or not torch.equal(a["dense"].to(want), b["dense"]):
                problems.append("dense tensor is not input.to(%s)" % want)
        if problems:
            failed += 1
            print("FAIL %s (torch %s): %s" % (label, torch.__version__, "; ".join(problems)))
        else:
            passed += 1
            print("ok   %s (torch %s)" % (label, torch.__version__))
    print("%d passed, %d failed" % (passed, failed))
    if passed + failed == 0:
        print("FAIL: no check ran")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
