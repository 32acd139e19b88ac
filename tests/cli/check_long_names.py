#!/usr/bin/env python3
"""Names that do not fit a message line, or that hold terminal escapes, in checkpoints torch wrote.

usage: check_long_names.py TENSORCTL OUTDIR   (run under a python with torch)

A checkpoint of one tensor and two integers under 500-character keys, converted to .safetensors,
once overflowed the "not representable, dropped" warning (SIGSEGV). Now: exit 0, one warning line
naming the first key whole and the second cut ("...", then how many were dropped), the file
loads with the tensor intact; to .pt the keys come back whole. Keys holding ESC [8m (conceal)
come out escaped in that warning, and no raw control byte reaches stderr or stdout.
Prints 'N passed, N failed'; exit 77 only when torch cannot be imported.
"""
import os
import shutil
import subprocess
import sys
import warnings

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means this interpreter cannot judge
    print("SKIP: torch is not importable by %s (%s)" % (sys.executable, e))
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import st_read  # noqa: E402  (the judges' own safetensors reader)

warnings.filterwarnings("ignore")


def load(path):
    return torch.load(path, weights_only=False) if torch.__version__ >= "2" else torch.load(path)


def run(tool, *args):
    return subprocess.run([tool] + list(args), capture_output=True)


HIDDEN = {0x061c, 0x200e, 0x200f} | set(range(0x202a, 0x202f)) | set(range(0x2066, 0x206a))


def controls(b):
    """What a terminal could take as a control in b: C0 (but the newlines ending lines), DEL, C1, and
    the bidirectional marks."""
    t = b.decode("utf-8", "replace")
    return sorted({hex(ord(c)) for c in t if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f
                   or ord(c) in HIDDEN})


def check_long(tool, outdir, problems):
    a, b = "a" * 500, "b" * 500
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    src = os.path.join(outdir, "long_keys.pt")
    torch.save({"w": w, a: 1, b: 2}, src)
    out = os.path.join(outdir, "long_keys.safetensors")
    r = run(tool, "convert", src, out)
    if r.returncode != 0:
        problems.append("convert to .safetensors: exit %d (%s)" % (r.returncode, r.stderr[-300:]))
        return
    lines = r.stderr.decode("utf-8").splitlines()
    head = "tensorctl: warning: %s: not representable, dropped: %s (int), b" % (out, a)
    if len(lines) != 2 or not lines[0].startswith(head) or not lines[0].endswith("... (2 in all)"):
        problems.append("the dropped warning is not the first key whole, the second cut: %r" % lines[:1])
    elif len(lines[0]) > len(out) + 900:
        problems.append("the dropped warning is %d characters long" % len(lines[0]))
    if len(lines) != 2 or lines[-1] != "tensorctl: wrote %s: 1 tensor; 24 B of tensor data" % out:
        problems.append("summary line: %r" % lines[-1:])
    got = st_read.read_tensors(out)
    if list(got) != ["w"] or not torch.equal(got["w"], w):
        problems.append("the .safetensors output does not hold w as saved: %s" % list(got))
    pt = os.path.join(outdir, "long_keys_back.pt")
    r = run(tool, "convert", "-q", src, pt)
    back = load(pt) if r.returncode == 0 else None
    if back is None or back.get(a) != 1 or back.get(b) != 2 or not torch.equal(back["w"], w):
        problems.append("convert to .pt: exit %d, keys %s" % (r.returncode, [len(k) for k in back or {}]))


def check_escapes(tool, outdir, problems):
    src = os.path.join(outdir, "escape_keys.pt")
    torch.save({"\x1b[8mw": torch.ones(2), "\x1b[8mk": 1, "bell\x07": 2, "csi\u009b2J\u202e": torch.zeros(1)}, src)
    out = os.path.join(outdir, "escape_keys.safetensors")
    r = run(tool, "convert", src, out)
    want = "tensorctl: warning: %s: not representable, dropped: \\x1b[8mk (int), bell\\x07 (int)" % out
    if r.returncode != 0 or r.stderr.decode("utf-8").splitlines()[:1] != [want]:
        problems.append("convert of escaped keys: exit %d, stderr %r" % (r.returncode, r.stderr[:300]))
    for args in (["inspect", src], ["inspect", "--json", src], ["convert", src, out + "2.safetensors"],
                 ["diff", src, out]):
        r = run(tool, *args)
        bad = controls(r.stdout + r.stderr)
        if bad:
            problems.append("%s: raw control bytes %s on a terminal" % (args[0], bad))
    if set(st_read.read_tensors(out)) != {"\x1b[8mw", "csi\u009b2J\u202e"}:
        problems.append("the escaped key was not written as it is")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    outdir = os.path.join(sys.argv[2], "torch-" + torch.__version__)  # each interpreter its own
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    passed = failed = 0
    for check in (check_long, check_escapes):
        problems = []
        check(tool, outdir, problems)
        if problems:
            failed += 1
            print("FAIL %s (torch %s):\n  %s" % (check.__name__, torch.__version__, "\n  ".join(problems)))
        else:
            passed += 1
            print("ok   %s (torch %s)" % (check.__name__, torch.__version__))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
