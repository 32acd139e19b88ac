#!/usr/bin/env python3
"""Inspect every checkpoint that has a NAME.expect.json beside it and compare.

usage: check_expect.py TENSORCTL DIR...

For each file, `tensorctl inspect --json --hash` must list exactly the tensors of
the expect file (names are its "path" joined by "."), each with the same dtype,
shape, stride, storage offset, device, parameter flag, requires_grad and SHA-256
of the logical elements. Prints one line per file and 'N passed, N failed'.

Fails (one line saying why) when a DIR is missing or holds no checkpoint with an expect file,
when an expect file has no checkpoint beside it or lists no tensor: a run that checked nothing
is a failure, never a pass.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import Report, compare_names  # noqa: E402


def compare(tool, path, expect):
    run = subprocess.run([tool, "inspect", "--json", "--hash", path], capture_output=True, text=True)
    if run.returncode not in (0, 4):
        return ["inspect exited %d: %s" % (run.returncode, run.stderr.strip())]
    got = json.loads(run.stdout)
    problems = []
    fmt = got["format"]
    by_name = {}
    for t in got["tensors"]:
        if t["name"] in by_name:
            problems.append("name listed twice: %s" % t["name"])
        by_name[t["name"]] = t
    want = {".".join(t["path"]): t for t in expect["tensors"]}
    names, both = compare_names(by_name, want)
    problems += names
    for name in both:
        w, g = want[name], by_name[name]
        pairs = [("dtype", "dtype"), ("shape", "shape"), ("stride", "stride"),
                 ("storage_offset", "storage_offset"), ("parameter", "parameter"),
                 ("requires_grad", "requires_grad"), ("sha256", "sha256")]
        if fmt != "safetensors":  # safetensors files carry no device
            pairs.append(("device", "device"))
        for wk, gk in pairs:
            if w.get(wk) != g.get(gk):
                problems.append("%s: %s is %r, expected %r" % (name, gk, g.get(gk), w.get(wk)))
    unsafe = bool(got.get("unsafe_globals") or got.get("hazards"))
    if "malicious" in os.path.basename(path):
        if run.returncode != 4 or not got.get("dangerous_globals"):
            problems.append("dangerous file not flagged (exit %d)" % run.returncode)
    elif run.returncode != (4 if unsafe else 0):
        problems.append("exit %d with unsafe globals %s" % (run.returncode, got.get("unsafe_globals")))
    if got.get("verdict") != ("unsafe" if unsafe else "safe"):
        problems.append("verdict %r but unsafe globals %s, hazards %s" % (got.get("verdict"), got.get("unsafe_globals"),
                                                                          got.get("hazards")))
    return problems


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    tool, dirs = sys.argv[1], sys.argv[2:]
    rep = Report(shown=20)
    for d in dirs:
        if not os.path.isdir(d):
            rep.check(d, ["folder not found (the corpus tests need it)"])
            continue
        in_dir = 0
        for root, _, files in sorted(os.walk(d)):
            for f in sorted(files):
                if not f.endswith(".expect.json"):
                    continue
                ckpt = os.path.join(root, f[: -len(".expect.json")])
                in_dir += 1
                if not os.path.exists(ckpt):
                    rep.check(ckpt, ["expect file without its checkpoint"])
                    continue
                with open(os.path.join(root, f)) as fh:
                    expect = json.load(fh)
                if not expect.get("tensors"):
                    rep.check(ckpt, ["the expect file lists no tensor, so it checks nothing"])
                    continue
                rep.check("%s (%d tensors)" % (ckpt, len(expect["tensors"])), compare(tool, ckpt, expect))
        if in_dir == 0:
            rep.check(d, ["no checkpoint with an expect file in it: nothing to check"])
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
