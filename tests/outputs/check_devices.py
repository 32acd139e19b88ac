#!/usr/bin/env python3
"""Device strings as torch reads them: every form below goes through torch 1.13 and torch 2.x (each
in its own interpreter) and through tensorctl's --device, --map and convert -d; they must agree.

    check_devices.py TENSORCTL SAMPLES_DIR OUTDIR

For each form, each torch says whether torch.device() takes it and keeps it as written (a bare
number N as torch.device(N)), and whether torch.load restores a storage tagged with it, data and
all (a file saved with that tag, loaded: loading it on a machine without that backend fails with
"not available" or "not registered", which still counts; "don't know how to restore", an invalid
device string, or a meta tensor without data do not). tensorctl must take the form exactly when
every torch parses it as written and some torch restores it, refusing the others by name (exit 2,
the form in its one line), and every output it writes must load in every torch, each storage
tagged with the form (cuda as cuda:0, N as cuda:N), every tensor equal to the input's.

Needs torch 1.13 and a torch 2.x: /usr/bin/python3, $TENSORCTL_TEST_PYTHON and each entry of
$TENSORCTL_EXTRA_PYTHONS are tried; with fewer than two versions it exits 77 saying so.
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, run  # noqa: E402

FORMS = [
    # taken by both, restored by one or both
    "cpu", "cuda", "cuda:0", "cuda:1", "cuda:7", "cuda:10", "cuda:127", "0", "1", "127", "mps", "mps:0", "xpu",
    "xpu:3", "hpu", "hpu:0", "privateuseone", "privateuseone:1",
    # refused by torch.device itself
    "cuda:01", "cuda:00", "cpu:00", "cuda:", ":0", "cuda:-1", "cuda:+1", "cuda: 1", " cuda", "cuda:1 ", "cuda:1.0",
    "cuda:0x1", "cuda::1", "cu-da", "gpu7", "1a", "01", "", "CUDA", "Cuda:0", "npu:0", "gpu", "tpu:0",
    # taken by torch.device, but its index kept in 8 bits: not what it says
    "cuda:128", "cuda:255", "cuda:256", "cuda:32768", "cuda:2147483648", "128", "300",
    # taken by only one torch
    "mtia:0", "maia:0", "ort", "mtia",
    # taken by both, not restored with data
    "meta", "meta:0", "cpu:0", "cpu:1", "ipu:0", "hip:0", "xla:0", "lazy", "vulkan", "ve", "fpga:0", "opengl",
    "opencl", "mkldnn", "ideep",
]

PROBE = r"""
import io, json, sys, warnings
warnings.simplefilter("ignore")
import torch, torch.serialization as S
forms = json.load(sys.stdin)
out = {"version": torch.__version__, "forms": {}}
orig = S.location_tag
for f in forms:
    r = {}
    try:
        d = torch.device(int(f)) if f.isdigit() else torch.device(f)
        r["parsed"] = str(d)
        r["kept"] = str(d) == ("cuda:" + f if f.isdigit() else f)  # "01" reads as cuda:1: not as written
    except Exception as e:
        r["parsed"] = None
        r["kept"] = False
        r["why"] = str(e).splitlines()[0][:120]
    if r["kept"]:
        tag = "cuda:" + str(int(f)) if f.isdigit() else f
        S.location_tag = lambda s, tag=tag: tag
        b = io.BytesIO()
        try:
            torch.save({"w": torch.ones(2)}, b)
        finally:
            S.location_tag = orig
        b.seek(0)
        try:
            t = torch.load(b)["w"]
            r["restores"] = not t.is_meta and torch.equal(t.cpu(), torch.ones(2))
            r["load"] = "loaded on " + str(t.device)
        except Exception as e:
            msg = str(e).splitlines()[0]
            r["restores"] = not ("know how to restore" in msg or "Invalid device string" in msg)
            r["load"] = msg[:120]
    out["forms"][f] = r
print(json.dumps(out))
"""

JUDGE = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
jobs = json.load(sys.stdin)
res = []
for j in jobs:
    seen = []
    def loc(storage, location):
        seen.append(location)
        return storage
    probs = []
    try:
        got = torch.load(j["out"], map_location=loc)
        want = torch.load(j["in"], map_location="cpu")
        flat = lambda o, p="": sum((flat(v, p + k + ".") for k, v in o.items()), []) if isinstance(o, dict) else [(p[:-1], o)]
        g, w = dict(flat(got)), dict(flat(want))
        for k, v in w.items():
            if isinstance(v, torch.Tensor) and (k not in g or not torch.equal(g[k].cpu(), v)):
                probs.append("tensor %s differs" % k)
        tags = sorted(set(seen))
        if j["tags"] is not None and tags != j["tags"]:
            probs.append("storages tagged %s, want %s" % (tags, j["tags"]))
    except Exception as e:
        probs.append("torch.load: %s" % str(e).splitlines()[0][:160])
    res.append(probs)
print(json.dumps(res))
"""


def pythons():
    seen, out = set(), []
    cands = [os.environ.get("TENSORCTL_TEST_PYTHON", ""), "/usr/bin/python3"]
    cands += os.environ.get("TENSORCTL_EXTRA_PYTHONS", "").split(":")
    for py in cands:
        if not py or py in seen or not shutil.which(py):
            continue
        seen.add(py)
        p = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
        if p.returncode == 0:
            out.append((py, p.stdout.strip()))
    return out


def ask(py, script, payload):
    p = subprocess.run([py, "-c", script], input=json.dumps(payload), capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise RuntimeError("%s: %s" % (py, p.stderr.strip()[-400:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tc, samples, out = argv[1], argv[2], argv[3]
    pys = pythons()
    majors = {v.split(".")[0] for _, v in pys}
    if not ({"1", "2"} <= majors):
        print("SKIP: needs torch 1.x and torch 2.x to judge device strings by both; found %s "
              "(set TENSORCTL_EXTRA_PYTHONS)" % [v for _, v in pys])
        return 77
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    verdicts = [ask(py, PROBE, FORMS) for py, _ in pys]
    rep = Report()
    src = os.path.join(samples, "tiny_mlp_cuda0.pt")  # storages tagged cuda:0
    jobs, meta = [], []
    for k, f in enumerate(FORMS):
        per = [v["forms"][f] for v in verdicts]
        want = all(r["kept"] for r in per) and any(r.get("restores") for r in per)
        tag = "cuda:0" if f == "cuda" else "cuda:" + str(int(f)) if f.isdigit() else f
        how = "; ".join("torch %s: %s" % (v["version"], r.get("load") or r.get("why") or r["parsed"])
                        for v, r in zip(verdicts, per))
        runs = [("to-cpu --map", ["to-cpu", "-q", src, "-o", os.path.join(out, "m%d.pt" % k), "--map", "cuda:0=" + f]),
                ("convert -d", ["convert", "-q", src, os.path.join(out, "c%d.pt" % k), "-d", f])]
        if tag.startswith("cuda:"):
            runs.append(("to-cuda --device", ["to-cuda", "-q", src, "-o", os.path.join(out, "g%d.pt" % k),
                                              "--device", f]))
        for what, args in runs:
            rc, _, err = run(tc, *args)
            dst = args[args.index("-o") + 1] if "-o" in args else args[3]
            probs = []
            lines = err.strip().splitlines()
            if want and rc:
                probs.append("refused (exit %d: %s) though every torch takes it and one restores it (%s)" %
                             (rc, err.strip(), how))
            elif not want and rc != 2:
                probs.append("exit %d, want 2 (a form torch does not take as written, or restores no data: %s)" %
                             (rc, how))
            elif not want and (len(lines) != 1 or ("'%s'" % f) not in lines[0]):
                probs.append("the refusal is not one line naming '%s': %r" % (f, err.strip()))
            if not want and os.path.exists(dst):
                probs.append("wrote %s" % dst)
            rep.check("%s %r %s" % (what, f, "taken" if want else "refused"), probs)
            if want and not rc:
                jobs.append({"in": src, "out": dst, "tags": [tag]})
                meta.append("%s %r: the output" % (what, f))
    # every output loads in every torch, each storage tagged as asked, tensors as the input's
    for py, ver in pys:
        res = ask(py, JUDGE, jobs)
        for m, probs in zip(meta, res):
            rep.check("%s loads in torch %s" % (m, ver), probs)
    # --map's FROM is a tag as a file carries it: any backend's name, torch's syntax
    for frm, ok in (("npu:0", True), ("cuda:0", True), ("cuda:01", False), ("x y", False), ("", False)):
        rc, _, err = run(tc, "to-cpu", "-q", src, "-o", os.path.join(out, "f.pt"), "-f", "--map", frm + "=cpu")
        rep.check("--map FROM %r %s" % (frm, "taken" if ok else "refused"),
                  [] if (rc == 0) == ok and (ok or rc == 2) else ["exit %d: %s" % (rc, err.strip())])
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
