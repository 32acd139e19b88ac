#!/usr/bin/env python3
"""Checkpoints written by torch 0.3/0.4 under Python 2: inspect, to-cpu, cast and convert them.

usage: check_py2.py TENSORCTL OUTDIR [FILE_OR_DIR...]     (run under a python with torch)

Default inputs: sample_models/py2_*.pt (made by sample_models/make_py2_samples.py), each with
NAME.expect.json beside it, written from what real torch loads. For every file:
  inspect   `tensorctl inspect --json --hash` lists exactly the expect file's tensors with the
            same dtype, shape, stride, offset, saved device, Parameter/requires_grad flags and
            SHA-256 (tests/cli/check_expect.py's comparison), exit 0;
  to-cpu    `tensorctl to-cpu` exits 0 and the output, loaded by torch, equals the input loaded
            by torch (values, shapes, strides, offsets, sharing, Parameters, requires_grad),
            every storage tagged cpu, plain torch.load works, weights_only=True works wherever it
            works on the input (tests/torch_verify.py verify_output);
  bfloat16  the same with `--dtype bfloat16`: floating tensors equal input.to(bfloat16);
  convert   `tensorctl convert IN OUT.safetensors --from .` exits 0 and OUT holds every tensor of
            the input, bit for bit, each under its name (path joined by '.') or as a
            "tensorctl.aliases" view of one that is there; without --from, a training checkpoint
            (a dict with 'state_dict' beside 'optimizer') gives the tensors under 'state_dict' alone,
            named relative to it, and any other file every tensor;
and the input file is byte-identical afterwards.
Prints PASS/FAIL per check, then 'N passed, N failed'. Exit 0, 1 on a failure, 2 on bad usage,
77 when torch cannot be imported.
"""
import glob
import hashlib
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import torch_verify  # noqa: E402
from torch_verify import torch  # noqa: E402
import check_expect  # noqa: E402
import st_read  # noqa: E402
from judge import Report, run  # noqa: E402

warnings.filterwarnings("ignore")


def sha_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_msg(cmd):
    """(exit status, stderr, or stdout where stderr is empty)"""
    rc, out, err = run(cmd)
    return rc, (err.strip() or out.strip())


def weights_key(inp_path):
    """The entry convert takes without --from: 'state_dict' of a training checkpoint, else None (every tensor)."""
    obj = torch_verify.load_checkpoint(inp_path).obj
    return "state_dict" if isinstance(obj, dict) and "state_dict" in obj and "optimizer" in obj else None


def check_safetensors(inp_path, st_path, key=None):
    problems = []
    loaded = torch_verify.load_checkpoint(inp_path)
    header, body = st_read.read_raw(st_path)
    try:
        aliases = st_read.aliases(header)
    except ValueError:
        return ["__metadata__ tensorctl.aliases is not JSON"]
    header.pop("__metadata__", None)
    want = {".".join(p): t for p, t in torch_verify.flatten(loaded.obj).items()}
    if key:
        want = {n[len(key) + 1:]: t for n, t in want.items() if n.startswith(key + ".")}
    for name, t in want.items():
        ref = t.detach()
        if name in header:
            flat, shape = st_read.stored(header, body, name), header[name]["shape"]
            if flat.dtype != ref.dtype:
                problems.append("%s: dtype %s, expected %s" % (name, torch_verify.dtype_name(flat.dtype),
                                                                torch_verify.dtype_name(ref.dtype)))
                continue
            if list(shape) != list(ref.shape):
                problems.append("%s: shape %s, expected %s" % (name, shape, list(ref.shape)))
                continue
            got = flat.reshape(shape)
        elif name in aliases:
            al = aliases[name]
            if al.get("of") not in header:
                problems.append("%s: alias of %r, which is not in the file" % (name, al.get("of")))
                continue
            flat = st_read.stored(header, body, al["of"])
            try:
                got = flat.as_strided(al["shape"], al["stride"], al["offset"])
            except Exception as e:  # noqa: BLE001
                problems.append("%s: alias view %s does not fit %s: %s" % (name, al, al["of"], e))
                continue
            if got.dtype != ref.dtype:
                problems.append("%s: alias dtype %s, expected %s" % (name, got.dtype, ref.dtype))
                continue
        else:
            problems.append("%s: not in the safetensors file" % name)
            continue
        if torch_verify.tensor_bytes(got) != torch_verify.tensor_bytes(ref):
            problems.append("%s: elements differ" % name)
    for name in header:
        if name not in want:
            problems.append("unexpected tensor %s in the safetensors file" % name)
    return problems


def check_file(tool, outdir, path, rep):
    name = os.path.basename(path)
    stem = name[:-3] if name.endswith(".pt") else name
    before = sha_file(path)
    with open(path + ".expect.json", encoding="utf-8") as f:
        expect = json.load(f)
    rep.check("%s inspect" % name, check_expect.compare(tool, path, expect))

    for label, extra, dtype in (("to-cpu", [], None),
                                ("to-cpu --dtype bfloat16", ["--dtype", "bfloat16"], "bfloat16")):
        out = os.path.join(outdir, stem + (".bf16" if dtype else "") + ".cpu.pt")
        if os.path.exists(out):
            os.remove(out)
        rc, msg = run_msg([tool, "to-cpu", "-q", "-f", path, "-o", out] + extra)
        if rc != 0:
            rep.check("%s %s" % (name, label), ["exit %d: %s" % (rc, msg)])
            continue
        problems, _ = torch_verify.verify_output(path, out, dtype=dtype, device="cpu")
        rep.check("%s %s (torch %s)" % (name, label, torch.__version__), problems)

    for label, extra, key in (("convert .safetensors --from .", ["--from", "."], None),
                              ("convert .safetensors", [], weights_key(path))):
        st = os.path.join(outdir, stem + (".all" if extra else "") + ".safetensors")
        if os.path.exists(st):
            os.remove(st)
        rc, msg = run_msg([tool, "convert", "-q", "-f", path, st] + extra)
        what = "%s %s%s" % (name, label, " (the weights under '%s')" % key if key else "")
        if rc != 0:
            rep.check(what, ["exit %d: %s" % (rc, msg)])
        else:
            rep.check("%s (torch %s)" % (what, torch.__version__), check_safetensors(path, st, key))

    rep.check("%s input unchanged" % name, [] if sha_file(path) == before else ["input file was modified"])


def inputs(args):
    if not args:
        args = [os.path.join(HERE, "..", "..", "sample_models")]
    files = []
    for a in args:
        if os.path.isdir(a):
            files += sorted(glob.glob(os.path.join(a, "py2_*.pt")))
        else:
            files.append(a)
    return [f for f in files if os.path.exists(f + ".expect.json")]


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if torch is None:
        print("check_py2: torch is not importable by %s" % sys.executable)
        return 77
    tool, outdir = argv[0], argv[1]
    os.makedirs(outdir, exist_ok=True)
    files = inputs(argv[2:])
    if not files:
        print("check_py2: no py2_*.pt file with an expect file found")
        return 2
    rep = Report()
    for path in files:
        check_file(tool, outdir, path, rep)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
