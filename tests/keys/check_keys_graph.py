#!/usr/bin/env python3
"""Key surgery on rewrites that keep the object graph (to-cpu, to-cuda, convert to .pt of a torch
checkpoint, and sharded sets rewritten whole), against real torch.

    check_keys_graph.py TENSORCTL OUTDIR

The options act on each dict that holds tensors directly: --drop/--only-keys match the full
dotted names and remove those items; --strip-prefix/--rename/--add-prefix rename the tensor keys
of each such dict, --strip-prefix without P by the first component that dict's tensor keys share.
Every output is loaded by torch and must equal the input object with exactly that done to it
(every other key, object and tensor unchanged, bit for bit). Attributes of a pickled nn.Module,
collisions and a dict reached by two paths are errors (exit 2) naming what is wrong and writing
nothing.

One line per check, then a count; exit 1 on any failure, 77 when torch is missing.
"""

import json
import os
import re
import shlex
import sys
import zipfile
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch.nn as nn  # noqa: E402
from torch_verify import tensor_bytes  # noqa: E402


def load(path, trusted=False):
    """weights_only=True where this torch can (1.13 lacks BINFLOAT: our own files fall back)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        if trusted or torch.__version__.startswith("1."):
            return torch.load(path, map_location="cpu", weights_only=False)
        raise


def diff(got, want, path="", out=None):
    """Every difference between two objects: dict keys in order, tensors bit for bit, other values."""
    out = [] if out is None else out
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            out.append("%s: %s, want a tensor" % (path, type(got).__name__))
        elif got.dtype != want.dtype or got.shape != want.shape or tensor_bytes(got) != tensor_bytes(want):
            out.append("%s: tensor differs" % path)
    elif isinstance(want, dict):
        if not isinstance(got, dict):
            out.append("%s: %s, want a dict" % (path, type(got).__name__))
        elif list(got.keys()) != list(want.keys()):
            out.append("%s: keys %s, want %s" % (path, list(got.keys())[:6], list(want.keys())[:6]))
        else:
            for k in want:
                diff(got[k], want[k], "%s.%s" % (path, k), out)
    elif isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            out.append("%s: %r, want %d items" % (path, type(got).__name__, len(want)))
        else:
            for i, (g, w) in enumerate(zip(got, want)):
                diff(g, w, "%s.%d" % (path, i), out)
    elif isinstance(want, nn.Module):
        diff(got.state_dict(), want.state_dict(), path + "<module>", out)
    elif got != want:
        out.append("%s: %r, want %r" % (path, got, want))
    return out


def rekey(d, fn):
    """A copy of dict d with fn applied to the keys whose values are tensors (None: removed)."""
    out = OrderedDict() if isinstance(d, OrderedDict) else {}
    for k, v in d.items():
        if isinstance(v, torch.Tensor):
            nk = fn(k)
            if nk is not None:
                out[nk] = v
        else:
            out[k] = v
    return out


def records(path):
    with zipfile.ZipFile(path) as z:
        return sum(1 for n in z.namelist() if "/data/" in n)


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 3)
        self.norm = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.norm(self.enc(x))


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tool, base = shlex.split(argv[1]), argv[2]
    out = out_dir(base, torch)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    rep = Report()

    torch.manual_seed(5)
    net = Small()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(5, 4)).sum().backward()
    opt.step()
    sd = nn.DataParallel(net).state_dict()
    ck = OrderedDict([("epoch", 3), ("state_dict", sd), ("optimizer", opt.state_dict())])
    torch.save(ck, p("ck.pt"))
    base_records = records(p("ck.pt"))

    def case(what, cmd, inp, outname, opts, want, trusted=False, after=None):
        dst = p(outname)
        args = [cmd, inp, "-o", dst] if cmd != "convert" else [cmd, inp, dst]
        rc, _, err = run(tool, *(args + ["-q"] + opts))
        if rc != 0:
            rep.check(what, ["exit %d: %s" % (rc, err.strip())])
            return None
        got = load(dst if not dst.endswith(".json") else dst, trusted) if not dst.endswith(".json") else None
        probs = diff(got, want) if got is not None else []
        if after:
            probs += after(dst, got)
        rep.check(what, probs)
        return got

    def opt_rekey(o, fn):
        o = dict(o)
        o["state"] = {i: rekey(s, fn) for i, s in o["state"].items()}
        return o

    strip = lambda k: k[len("module."):] if k.startswith("module.") else k  # noqa: E731
    want = OrderedDict(ck)
    want["state_dict"] = rekey(sd, strip)
    case("to-cpu --strip-prefix: the state_dict's keys, per dict; the optimizer's keys share none", "to-cpu",
         p("ck.pt"), "strip.pt", ["--strip-prefix"], want)
    want = OrderedDict(ck)
    want["state_dict"] = rekey(sd, lambda k: k.replace("module.enc.", "", 1) if k.startswith("module.enc.") else k)
    case("to-cpu --strip-prefix=module.enc. only where it is", "to-cpu", p("ck.pt"), "strip-enc.pt",
         ["--strip-prefix=module.enc."], want)
    want = OrderedDict(ck)
    want["state_dict"] = rekey(sd, lambda k: re.sub(r"^module\.(enc|norm)\.", r"\1_layer.", k, count=1))
    case("to-cuda --rename with groups", "to-cuda", p("ck.pt"), "rename.pt",
         ["--rename", r"^module\.(enc|norm)\.=\1_layer."], want)
    want = OrderedDict(ck)
    want["state_dict"] = rekey(sd, lambda k: "m." + k)
    want["optimizer"] = opt_rekey(ck["optimizer"], lambda k: "m." + k)
    case("convert to .pt --add-prefix: every dict holding tensors, the optimizer's per-parameter state too",
         "convert", p("ck.pt"), "add.pt", ["--add-prefix", "m."], want)
    want = OrderedDict(ck)
    want["optimizer"] = opt_rekey(ck["optimizer"], lambda k: None)
    fewer = lambda dst, got: [] if records(dst) == len(sd) else ["%d data records, want %d" % (records(dst), len(sd))]  # noqa: E731,E501
    case("to-cpu --drop 'optimizer.*': the items go, their storages are not written", "to-cpu", p("ck.pt"),
         "drop.pt", ["--drop", "optimizer.*"], want, after=fewer)
    case("to-cpu --only-keys 'state_dict.*': the same", "to-cpu", p("ck.pt"), "only.pt",
         ["--only-keys", "state_dict.*"], want, after=fewer)
    want = OrderedDict(ck)
    want["state_dict"] = rekey(sd, lambda k: None if k.startswith("module.norm.") else strip(k))
    case("--drop then --strip-prefix", "to-cpu", p("ck.pt"), "drop-strip.pt",
         ["--drop", "state_dict.module.norm.*", "--strip-prefix"], want)
    case("no option: the rewrite is unchanged", "to-cpu", p("ck.pt"), "plain.pt", [], ck,
         after=lambda dst, got: [] if records(dst) == base_records else ["records differ"])

    # a dict reached by two paths is one dict
    d = OrderedDict([("module.x", torch.randn(3)), ("module.y", torch.arange(4))])
    torch.save({"a": d, "b": d}, p("shared.pt"))
    got = case("a dict reached by two paths is renamed once", "to-cpu", p("shared.pt"), "shared.out.pt",
               ["--strip-prefix"], {"a": rekey(d, strip), "b": rekey(d, strip)})
    if got is not None:
        rep.check("... and is still one object", [] if got["a"] is got["b"] else ["two dicts"])
    case("--drop naming it by both paths", "to-cpu", p("shared.pt"), "shared.drop.pt", ["--drop", "*.module.x"],
         {"a": rekey(d, lambda k: None if k == "module.x" else k), "b": rekey(d, lambda k: None if k == "module.x"
                                                                             else k)})
    # a pickled module beside a state_dict: the module is not touched
    torch.save({"model": net, "sd": sd}, p("mod-and-sd.pt"))
    case("a pickled module beside a state_dict: only the dict is renamed", "to-cpu", p("mod-and-sd.pt"),
         "mod-and-sd.out.pt", ["--allow-unsafe", "--strip-prefix"], {"model": net, "sd": rekey(sd, strip)},
         trusted=True)

    # errors: exit 2, one line naming what is wrong, nothing written
    torch.save({"state_dict": OrderedDict([("module.w", torch.ones(2)), ("w", 5)])}, p("clash.pt"))
    torch.save(net, p("module.pt"))

    def refused(what, cmd, inp, opts, needles, rc_want=2):
        dst = p("refused.pt")
        if os.path.exists(dst):
            os.unlink(dst)
        args = [cmd, inp, "-o", dst] if cmd != "convert" else [cmd, inp, dst]
        rc, _, err = run(tool, *(args + opts))
        probs = [] if rc == rc_want else ["exit %d, want %d" % (rc, rc_want)]
        probs += ["stderr lacks %r: %r" % (n, err.strip()) for n in needles if n not in err]
        if len(err.strip().splitlines()) != 1:
            probs.append("%d lines on stderr" % len(err.strip().splitlines()))
        if os.path.exists(dst):
            probs.append("wrote %s" % dst)
        rep.check(what, probs)

    refused("two keys renamed onto one: both named", "to-cpu", p("ck.pt"), ["--rename", "weight=bias"],
            ["'module.enc.weight'", "'module.enc.bias'", "in 'state_dict'"])
    refused("a key renamed onto one the dict keeps", "to-cpu", p("clash.pt"), ["--strip-prefix"],
            ["'state_dict.module.w'", "'state_dict.w'"])
    refused("a pickled module's parameters are not renamed: extract", "to-cpu", p("module.pt"),
            ["--allow-unsafe", "--add-prefix", "x."], ["attribute of a pickled object", "tensorctl extract"])
    refused("nor removed", "convert", p("module.pt"), ["--allow-unsafe", "--drop", "enc.weight"],
            ["'enc.weight'", "tensorctl extract"])
    refused("--drop naming one path of a shared dict", "to-cpu", p("shared.pt"), ["--drop", "a.module.x"],
            ["'a.module.x'", "'b.module.x'"])
    refused("--strip-prefix with no dict to strip", "to-cpu", p("module.pt"), ["--allow-unsafe", "--strip-prefix"],
            ["share a first component"])
    torch.save([torch.ones(2), torch.zeros(2)], p("list.pt"))
    refused("a list element cannot be dropped", "to-cpu", p("list.pt"), ["--drop", "1"], ["'1'", "list"])

    # a sharded set rewritten whole: the index names the tensors as they now are
    setdir = p("set")
    os.makedirs(setdir)
    keys = list(sd.keys())
    halves = [OrderedDict((k, sd[k]) for k in keys[:3]), OrderedDict((k, sd[k]) for k in keys[3:])]
    wm = OrderedDict()
    total = 0
    for i, h in enumerate(halves):
        name = "pytorch_model-%05d-of-00002.bin" % (i + 1)
        torch.save(h, os.path.join(setdir, name))
        for k, v in h.items():
            wm[k] = name
            total += v.numel() * v.element_size()
    with open(os.path.join(setdir, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total, "note": "kept"}, "weight_map": wm}, f)

    def set_case(what, opts, fn):
        o = p("set-out-%d" % rep.passed)
        rc, _, err = run(tool, "to-cpu", "-q", os.path.join(setdir, "pytorch_model.bin.index.json"), "-o", o, *opts)
        probs = ["exit %d: %s" % (rc, err.strip())] if rc else []
        if not probs:
            with open(os.path.join(o, "pytorch_model.bin.index.json")) as f:
                ix = json.load(f)
            wantmap = OrderedDict((fn(k), v) for k, v in wm.items() if fn(k) is not None)
            if ix["weight_map"] != wantmap:
                probs.append("weight_map %s, want %s" % (list(ix["weight_map"].items())[:3],
                                                         list(wantmap.items())[:3]))
            if ix["metadata"].get("note") != "kept":
                probs.append("metadata %r" % ix["metadata"])
            got = OrderedDict()
            for shard in sorted(set(ix["weight_map"].values())):
                got.update(load(os.path.join(o, shard)))
            probs += diff(dict(sorted(got.items())), dict(sorted(rekey(sd, fn).items())))
            size = sum(v.numel() * v.element_size() for k, v in sd.items() if fn(k) is not None)
            if int(ix["metadata"]["total_size"]) != size:
                probs.append("total_size %s, want %d" % (ix["metadata"]["total_size"], size))
        rep.check(what, probs)

    set_case("a set rewritten with --strip-prefix: shards and index", ["--strip-prefix"], strip)
    set_case("a set rewritten with --drop and --add-prefix", ["--drop", "module.norm.*", "--add-prefix", "net."],
             lambda k: None if k.startswith("module.norm.") else "net." + k)

    return rep.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
