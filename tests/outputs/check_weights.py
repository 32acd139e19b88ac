#!/usr/bin/env python3
"""Weights out as torch has them, and one exit status for a refusal on safety grounds, judged by the
torch running this script (files written here with it).

    check_weights.py TENSORCTL OUTDIR

  - torch.save(module) under pickle protocols 2 and 4 (protocol 4 builds the module's
    _non_persistent_buffers_set with EMPTY_SET + ADDITEMS): extract gives exactly
    module.state_dict(), the non-persistent buffer left out, its classes gone before tensorctl runs.
  - a chgnet-style training checkpoint, its weights in ckpt["model"]["state_dict"] beside
    ckpt["model"]'s other entries and an optimizer: extract (and --from model) gives the names
    ckpt["model"]["state_dict"] has, the summary naming 'model.state_dict'; a plain state_dict
    whose flat keys start with "model." keeps them.
  - a scripted module with List[int] attributes (so data.pkl calls torch.jit._pickle.build_intlist):
    extract without --allow-unsafe writes torch.jit.load(f).state_dict(), the verdict said as a
    warning; to-cpu still refuses it, exit 4.
  - (torch 2.x) consolidate of a torch.distributed.checkpoint folder writes a plain dict, as
    dcp_to_torch_save does, and the same tensors.
  - a file that runs code when loaded (os.system), one with a global outside the allowlist, and a
    TorchScript archive whose data.pkl names os.system: to-cpu, to-cuda, convert (.pt and
    .safetensors), extract and, for DCP, consolidate refuse each with exit 4, whatever the command.

One line per check, then a count; exit 1 on any failure, 77 when torch is missing.
"""

import argparse
import os
import subprocess
import sys
import types
import warnings
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch.nn as nn  # noqa: E402
import torch_verify  # noqa: E402

warnings.simplefilter("ignore")

MODULE_SRC = '''
import torch.nn as nn, torch
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.block = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
        self.register_buffer("keep", torch.ones(2))
        self.register_buffer("cache", torch.zeros(4), persistent=False)
'''


class IntLists(nn.Module):
    sizes: list
    __annotations__ = {"sizes": "List[int]", "pads": "List[int]"}

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.sizes = [1, 2, 3]
        self.pads = [0, 4]
        self.register_buffer("scale", torch.ones(2))

    def forward(self, x):
        return self.lin(x) * self.scale * self.sizes[0] + self.pads[0]


class Evil:
    def __reduce__(self):
        return (os.system, ("true",))


def load(path):
    return dict(torch.load(path, map_location="cpu", weights_only=True))


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tc, out = argv[1], out_dir(argv[2], torch)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    rep = Report()
    v2 = int(torch.__version__.split(".")[0]) >= 2

    def extract(what, inp, dst, want, args=(), needles=()):
        rc, _, err = run(tc, "extract", inp, "-o", dst, *args)
        probs = [] if rc == 0 else ["exit %d: %s" % (rc, err.strip())]
        probs += ["stderr lacks %r: %r" % (n, err.strip()) for n in needles if n not in err]
        if not rc:
            try:
                probs += torch_verify.same_tensors(load(dst), want, plain=True)
            except Exception as e:  # noqa: BLE001
                probs.append("does not load with weights_only=True: %s" % e)
        rep.check(what, probs)

    # ---- a module pickled whole, protocols 2 and 4, its classes gone
    mod = types.ModuleType("tc_gone_net")
    exec(MODULE_SRC, mod.__dict__)
    sys.modules["tc_gone_net"] = mod
    torch.manual_seed(0)
    net = mod.Net()
    net.eval()
    want = {k: v.clone() for k, v in net.state_dict().items()}
    for proto in (2, 4):
        torch.save(net, p("module_p%d.pt" % proto), pickle_protocol=proto)
    with open(p("module_p4.pt"), "rb") as f:
        data = zipfile.ZipFile(f).read("module_p4/data.pkl")
    rep.check("protocol 4 builds the set with EMPTY_SET + ADDITEMS",
              [] if b"\x8f" in data and b"\x90" in data else ["no EMPTY_SET/ADDITEMS in data.pkl"])
    del sys.modules["tc_gone_net"]
    for proto in (2, 4):
        extract("torch.save(module) protocol %d: state_dict(), the non-persistent buffer left out" % proto,
                p("module_p%d.pt" % proto), p("module_p%d.out.pt" % proto), want)

    # ---- chgnet-style: ckpt["model"]["state_dict"]
    torch.manual_seed(1)
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))
    opt = torch.optim.Adam(m.parameters())
    m(torch.ones(1, 3)).sum().backward()
    opt.step()
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    torch.save({"model": {"model_name": "chg", "state_dict": m.state_dict(), "model_args": {"a": 1}},
                "optimizer": opt.state_dict(), "epoch": 3}, p("chg.pt"))
    extract("chgnet-style: the names ckpt['model']['state_dict'] has", p("chg.pt"), p("chg.out.pt"), sd,
            needles=["from 'model.state_dict'", "its state_dict 'model.state_dict'"])
    extract("chgnet-style with --from model: the same", p("chg.pt"), p("chg2.out.pt"), sd, ["--from", "model"],
            needles=["from 'model.state_dict'"])
    flat = {"model.0.weight": torch.ones(2), "model.1.weight": torch.zeros(2)}
    torch.save({"state_dict": flat}, p("flat.pt"))
    extract("flat keys starting with 'model.' keep their names", p("flat.pt"), p("flat.out.pt"), flat)

    # ---- TorchScript with List[int] attributes
    try:
        from typing import List
        IntLists.__annotations__ = {"sizes": List[int], "pads": List[int]}
        sm = torch.jit.script(IntLists())
        sm.save(p("intlist.pt"))
        ok = b"build_intlist" in zipfile.ZipFile(p("intlist.pt")).read("intlist/data.pkl")
    except Exception as e:  # noqa: BLE001
        ok = False
        print("note: this torch cannot script the module: %s" % e)
    if ok:
        swant = {k: v.clone() for k, v in torch.jit.load(p("intlist.pt")).state_dict().items()}
        extract("TorchScript with List[int] attributes: extracted without --allow-unsafe", p("intlist.pt"),
                p("intlist.out.pt"), swant, needles=["UNSAFE to load", "build_intlist"])
        rc, _, err = run(tc, "to-cpu", p("intlist.pt"), "-o", p("intlist.cpu.pt"))
        rep.check("TorchScript: to-cpu refuses it, exit 4", [] if rc == 4 else ["exit %d: %s" % (rc, err.strip())])
    else:
        rep.check("a scripted module whose data.pkl calls build_intlist", ["none was made"])

    # ---- consolidate writes the dict dcp_to_torch_save writes
    if v2:
        try:
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
        except ImportError:
            dcp = None
        if dcp is not None:
            state = {"model": m.state_dict(), "epoch": 3}
            dcp.save(state, checkpoint_id=p("dcp"))
            dcp_to_torch_save(p("dcp"), p("ref.pt"))
            ref = torch.load(p("ref.pt"), weights_only=False)
            rc, _, err = run(tc, "consolidate", "-q", p("dcp"), "-o", p("dcp.pt"))
            probs = [] if rc == 0 else ["exit %d: %s" % (rc, err.strip())]
            if not rc:
                got = torch.load(p("dcp.pt"), weights_only=True)
                if type(got) is not type(ref) or type(ref) is not dict:
                    probs.append("a %s, dcp_to_torch_save writes a %s" % (type(got).__name__, type(ref).__name__))
                flat_ref = {"model." + k: v for k, v in ref["model"].items()}
                probs += torch_verify.same_tensors({k: v for k, v in got.items() if k.startswith("model.")}, flat_ref)
                if got.get("epoch") != 3:
                    probs.append("epoch %r" % got.get("epoch"))
            rep.check("consolidate writes a plain dict, as dcp_to_torch_save does", probs)
            dcp.save({"w": torch.ones(2), "ev": Evil()}, checkpoint_id=p("dcp_evil"))

    # ---- one exit status for every refusal on safety grounds
    torch.save({"w": torch.ones(2), "ev": Evil()}, p("evil.pt"))
    torch.save({"w": torch.ones(2), "ns": argparse.Namespace(a=1)}, p("ns.pt"))
    if ok:  # a TorchScript archive whose data.pkl also names os.system: not TorchScript's own
        zin = zipfile.ZipFile(p("intlist.pt"))
        with zipfile.ZipFile(p("ts_evil.pt"), "w") as z:
            for info in zin.infolist():
                b = zin.read(info.filename)
                if info.filename.endswith("/data.pkl"):  # os.system('true') called and popped, then the module
                    b = b"cposix\nsystem\n(S'true'\ntR0" + b
                z.writestr(info, b)
    cases = [("a file that runs code", p("evil.pt"), ["to-cpu", "to-cuda", "convert-pt", "convert-st", "extract"]),
             ("a global outside the allowlist", p("ns.pt"), ["to-cpu", "to-cuda", "convert-pt"])]
    if ok:
        cases.append(("a TorchScript archive naming os.system", p("ts_evil.pt"), ["convert-st", "extract"]))
    if v2 and os.path.isdir(p("dcp_evil")):
        cases.append(("a distributed checkpoint that runs code", p("dcp_evil"), ["consolidate-pt", "consolidate-st"]))
    for what, f, cmds in cases:
        for c in cmds:
            dst = p("refused." + ("safetensors" if c.endswith("-st") else "pt"))
            args = {"to-cpu": ["to-cpu", f, "-o", dst], "to-cuda": ["to-cuda", f, "-o", dst],
                    "convert-pt": ["convert", f, dst], "convert-st": ["convert", f, dst],
                    "extract": ["extract", f, "-o", dst], "consolidate-pt": ["consolidate", f, "-o", dst],
                    "consolidate-st": ["consolidate", f, "-o", dst]}[c]
            rc, _, err = run(tc, *args)
            lines = err.strip().splitlines()
            probs = [] if rc == 4 else ["exit %d, want 4: %s" % (rc, err.strip())]
            if len(lines) != 1 or "refusing to" not in lines[0] and "before it fails" not in lines[0]:
                probs.append("stderr %r" % err.strip())
            if os.path.exists(dst):
                probs.append("wrote %s" % dst)
                os.unlink(dst)
            rep.check("%s: %s refuses it with exit 4" % (what, c), probs)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
