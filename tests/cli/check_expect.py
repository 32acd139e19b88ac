#!/usr/bin/env python3
"""Inspect every checkpoint that has a NAME.expect.json beside it and compare.

usage: check_expect.py TENSORCTL DIR...

For each file, `tensorctl inspect --json --hash` must list exactly the tensors of
the expect file (names are its "path" joined by "."), each with the same dtype,
shape, stride, storage offset, device, parameter flag, requires_grad and SHA-256
of the logical elements. Prints one line per file and 'N passed, N failed'.
"""
import json
import os
import subprocess
import sys


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
    for name in sorted(set(by_name) - set(want)):
        problems.append("unexpected tensor %s" % name)
    for name in sorted(set(want) - set(by_name)):
        problems.append("missing tensor %s" % name)
    for name in sorted(set(want) & set(by_name)):
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
    tool, dirs = sys.argv[1], sys.argv[2:]
    passed = failed = 0
    for d in dirs:
        if not os.path.isdir(d):
            print("SKIP %s: not found" % d)
            continue
        for root, _, files in sorted(os.walk(d)):
            for f in sorted(files):
                if not f.endswith(".expect.json"):
                    continue
                ckpt = os.path.join(root, f[: -len(".expect.json")])
                if not os.path.exists(ckpt):
                    continue
                with open(os.path.join(root, f)) as fh:
                    expect = json.load(fh)
                problems = compare(tool, ckpt, expect)
                if problems:
                    failed += 1
                    print("FAIL %s" % ckpt)
                    for p in problems[:20]:
                        print("    " + p)
                else:
                    passed += 1
                    print("ok   %s (%d tensors)" % (ckpt, len(expect["tensors"])))
    print("%d passed, %d failed" % (passed, failed))
    if passed == 0:
        print("no checkpoint with an expect file was found")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
