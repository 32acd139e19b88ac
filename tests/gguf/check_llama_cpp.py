#!/usr/bin/env python3
"""GGUF outputs judged by llama.cpp's own tools: a llama GGUF (F16) requantised
by tensorctl to Q8_0 holds the same tensors as llama-quantize's Q8_0 of it,
byte for byte, and llama-completion loads it and runs it; for Q4_0, Q4_1, Q5_0 and Q5_1 every tensor llama-quantize writes in
that type equals tensorctl's (it keeps output.weight at a higher type, its
own policy), and tensorctl's file runs; a split output (--max-shard-size)
loads and runs through its first file.

Usage: check_llama_cpp.py TENSORCTL OUTDIR LLAMA_F16_GGUF. The tools come
from PATH (llama-completion, llama-quantize: Debian unstable's
llama.cpp-tools), or from $TENSORCTL_LLAMA_CPP_ROOT, a system root that has
them (a debootstrap'd Debian unstable with llama.cpp-tools), run there with
chroot. Skips (77) when neither is here."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

tc, outdir, src = sys.argv[1], sys.argv[2], sys.argv[3]
root = os.environ.get("TENSORCTL_LLAMA_CPP_ROOT", "")
fails = []


def fail(m):
    fails.append(m)
    print("FAIL " + m)


if shutil.which("llama-completion") and shutil.which("llama-quantize"):
    root = ""
    os.makedirs(outdir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="llama-", dir=outdir)
elif root and os.path.exists(os.path.join(root, "usr", "bin", "llama-completion")):
    work = tempfile.mkdtemp(prefix="tensorctl-llama-", dir=os.path.join(root, "tmp"))
else:
    print("SKIP: llama.cpp's tools are not here (Debian unstable: apt-get install llama.cpp-tools; or set "
          "TENSORCTL_LLAMA_CPP_ROOT to a system root that has them)")
    sys.exit(77)


def inside(p):  # the path the tools see
    return "/" + os.path.relpath(p, root) if root else p


def tool(*args):
    cmd = (["chroot", root] if root else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, timeout=600)  # random weights write any bytes
    p.stderr = p.stderr.decode(errors="replace")
    return p


def tensors(path):
    p = subprocess.run([tc, "inspect", "--json", "--hash", path], capture_output=True, text=True)
    if p.returncode:
        fail(f"inspect {path}: {p.stderr.strip()}")
        return {}
    return {t["name"]: (t["gguf"]["ggml_type"], t["gguf"]["sha256"]) for t in json.loads(p.stdout)["tensors"]}


def complete(path):
    """llama-completion on path, greedy, 16 tokens: it exits 0 only when it loaded the model and generated.
    (Its text and its log are not compared: llama.cpp 0.7's log thread loses lines at exit, even of --log-file.)"""
    log = path + ".log"
    p = tool("llama-completion", "-m", inside(path), "-p", "Once upon a time", "-n", "16", "--temp", "0", "--seed", "1",
             "-no-cnv", "-t", "1", "--log-file", inside(log))
    if p.returncode:
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
        fail(f"llama-completion on {path}: exit {p.returncode}: {(text or p.stderr)[-600:]}")
    return p.returncode == 0


try:
    f16 = os.path.join(work, "f16.gguf")
    shutil.copyfile(src, f16)
    for q in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        mine, theirs = os.path.join(work, f"tc-{q}.gguf"), os.path.join(work, f"lq-{q}.gguf")
        p = subprocess.run([tc, "convert", "-q", "--dtype", q, f16, mine], capture_output=True, text=True)
        if p.returncode:
            fail(f"convert --dtype {q}: {p.stderr.strip()}")
            continue
        p = tool("llama-quantize", inside(f16), inside(theirs), q)
        if p.returncode:
            fail(f"llama-quantize {q}: {p.stderr.strip()[-400:]}")
            continue
        a, b = tensors(mine), tensors(theirs)
        if sorted(a) != sorted(b):
            fail(f"{q}: tensor names differ from llama-quantize's")
        same = [k for k in b if b[k][0] == q]
        for k in same:
            if a.get(k) != b[k]:
                fail(f"{q}: {k} is not llama-quantize's {q} bytes")
        if q == "Q8_0" and len(same) != len([k for k in a if a[k][0] == "Q8_0"]):
            fail("Q8_0: llama-quantize left some 2-D tensor in another type")
        if complete(mine):
            print(f"{q}: {len(same)} tensors equal llama-quantize's; llama-completion loads and runs it")
    split = os.path.join(work, "split.gguf")
    p = subprocess.run([tc, "convert", "-q", "--dtype", "Q8_0", "--max-shard-size", "30KB", f16, split],
                       capture_output=True, text=True)
    first = sorted(f for f in os.listdir(work) if f.startswith("split-"))
    if p.returncode or len(first) < 2:
        fail(f"split output: {p.stderr.strip()} {first}")
    else:
        if complete(os.path.join(work, first[0])):
            print(f"split into {len(first)} files: llama-completion loads and runs it")
finally:
    shutil.rmtree(work, ignore_errors=True)
print(f"{len(fails)} failures")
sys.exit(1 if fails else 0)
