#!/usr/bin/env python3
"""extract against real torch: every output must load with torch.load(weights_only=True) and equal,
tensor for tensor and bit for bit, what model.state_dict() (or the entry taken) gave at save time.

    check_extract.py TENSORCTL OUTDIR SAMPLES_DIR

Inputs are made here, with the torch running this script, in OUTDIR/<torch version>/:
  - the state_dict of a model wrapped in nn.DataParallel ('module.'), and one of torch.compile
    ('_orig_mod.'; written by hand where torch has no compile);
  - a Lightning-style checkpoint (optimizer, scheduler, callbacks, hyper-parameters) and a
    training checkpoint with an EMA copy (exit 2 listing both until --ema or --from chooses);
  - torch.save(model), torch.save({'model': model, ...}) of a model whose classes live in a
    throwaway module, removed before tensorctl runs (loading the files in torch then fails);
    nested modules, buffers, a non-persistent buffer, tied weights, float16 layers;
  - TorchScript archives (torch.jit.script and torch.jit.trace of a nested module with buffers,
    a non-persistent buffer, a plain tensor attribute, a Linear without bias), judged against
    torch.jit.load(f).state_dict();
  - sharded outputs (.safetensors and .bin sets) and a --dtype bfloat16 extract.
The samples of SAMPLES_DIR made by make_extract_samples.py (with another torch, maybe) are
extracted too and judged against their expect files (the SHA-256 of every tensor) and, for the
TorchScript ones, against torch.jit.load.

One line per check, then a count; exit 1 on any failure, 77 when torch is missing.
"""

import hashlib
import importlib
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import OrderedDict

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("SKIP: torch cannot be imported")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import torch_verify  # noqa: E402

ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
             "BOOL": torch.bool}

passed = failed = 0


def check(what, problems):
    global passed, failed
    if problems:
        failed += 1
        print("FAIL %s: %s" % (what, "; ".join(str(p) for p in problems[:6])))
    else:
        passed += 1
        print("PASS %s" % what)


def run(tool, *args):
    p = subprocess.run(tool + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def read_safetensors(path):
    """The tensors of a safetensors file, read as the format says (not through tensorctl)."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    data = blob[8 + hlen:]
    out = OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = ST_DTYPES[info["dtype"]]
        raw = bytearray(data[a:b])
        t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"])
    aliases = json.loads(header.get("__metadata__", {}).get("tensorctl.aliases", "{}"))
    for name, a in aliases.items():
        out[name] = torch.as_strided(out[a["of"]].reshape(-1), a["shape"], a["stride"], a["offset"])
    return out


def load(path):
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    if path.endswith(".index.json"):
        with open(path) as f:
            ix = json.load(f)
        out = OrderedDict()
        for shard in sorted(set(ix["weight_map"].values())):
            part = load(os.path.join(os.path.dirname(path), shard))
            for k, v in part.items():
                if ix["weight_map"].get(k) != shard:
                    raise ValueError("%s holds %s, which the index puts elsewhere" % (shard, k))
                out[k] = v
        if set(out) != set(ix["weight_map"]):
            raise ValueError("the shards hold %d names, the index %d" % (len(out), len(ix["weight_map"])))
        return out
    return torch.load(path, map_location="cpu", weights_only=True)


def bits(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.is_floating_point():
        t = t.view({8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}[t.element_size()])
    return t


def same(got, want, plain=True):
    """Problems between {name: tensor} maps: names, dtypes, shapes, bits; plain tensors."""
    probs = []
    if sorted(got) != sorted(want):
        extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
        return ["names: extra %s, missing %s" % (extra[:5], missing[:5])]
    for k, w in want.items():
        g = got[k]
        if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
            probs.append("%s: %s %s, want %s %s" % (k, g.dtype, tuple(g.shape), w.dtype, tuple(w.shape)))
        elif not torch.equal(bits(g), bits(w)):
            probs.append("%s: bits differ" % k)
        elif plain and (type(g) is not torch.Tensor or g.requires_grad):
            probs.append("%s: a %s with requires_grad=%s, not a plain tensor" % (k, type(g).__name__,
                                                                                 g.requires_grad))
    return probs


def storage_ptr(t):
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


def shares(got, a, b):
    return [] if storage_ptr(got[a]) == storage_ptr(got[b]) else ["%s and %s are two storages" % (a, b)]


MODELS_SRC = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.register_buffer("scale", torch.full((d,), 0.5))
        self.register_buffer("cache", torch.zeros(2, d), persistent=False)


class Net(nn.Module):
    def __init__(self, vocab=24, d=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.bn = nn.BatchNorm1d(d)
        self.half = nn.Linear(d, 4).half()
        self.register_buffer("mask", torch.ones(6, dtype=torch.bool), persistent=False)
'''


class Net(nn.Module):
    """The same model, defined here (for state_dicts)."""

    def __init__(self, vocab=24, d=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d))
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.bn = nn.BatchNorm1d(d)
        self.half = nn.Linear(d, 4).half()
        self.register_buffer("cache", torch.zeros(3), persistent=False)


class Scripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, bias=False))
        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.LayerNorm(2)])
        self.bn = nn.BatchNorm1d(2)
        self.p = nn.Parameter(torch.randn(2))
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("tmp", torch.zeros(2), persistent=False)
        self.plain = torch.arange(3.0)

    def forward(self, x):
        y = self.bn(self.inner(x))
        for m in self.layers:
            y = m(y)
        return y * self.scale + self.p + self.tmp


def throwaway_model(workdir, seed):
    """Net from a module imported from workdir, and the function that removes that module."""
    name = "tensorctl_gone_%d" % seed
    with open(os.path.join(workdir, name + ".py"), "w") as f:
        f.write(MODELS_SRC)
    sys.path.insert(0, workdir)
    mod = importlib.import_module(name)
    torch.manual_seed(seed)
    net = mod.Net()
    with torch.no_grad():
        net.bn(torch.randn(4, 8))

    def remove():
        sys.path.remove(workdir)
        sys.modules.pop(name, None)
        os.unlink(os.path.join(workdir, name + ".py"))
        shutil.rmtree(os.path.join(workdir, "__pycache__"), ignore_errors=True)
    return net, remove


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tool, base, samples = shlex.split(argv[1]), argv[2], argv[3]
    out = os.path.join(base, "torch-" + re.sub(r"[^0-9A-Za-z.]", "_", torch.__version__))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    p = lambda n: os.path.join(out, n)  # noqa: E731

    def extract(what, inp, outname, opts, want, plain=True, expect_rc=0, needles=(), after=None):
        dst = p(outname)
        rc, _, err = run(tool, "extract", inp, "-o", dst, *opts)
        probs = []
        if rc != expect_rc:
            probs.append("exit %d, want %d: %s" % (rc, expect_rc, err.strip()))
        for n in needles:
            if n not in err:
                probs.append("stderr lacks %r: %r" % (n, err.strip()))
        got = None
        if not probs and expect_rc == 0:
            try:
                got = load(dst)
            except Exception as e:  # noqa: BLE001
                probs.append("does not load with weights_only=True: %s" % e)
            if got is not None:
                probs += same(got, want, plain)
                if after:
                    probs += after(got)
        elif expect_rc and os.path.exists(dst):
            probs.append("wrote %s" % dst)
        check(what, probs)
        return got

    torch.manual_seed(1)
    net = Net()
    with torch.no_grad():
        net.bn(torch.randn(4, 8))
    sd = net.state_dict()
    tied = lambda g: shares(g, "head.weight", "embed.weight")  # noqa: E731

    # DataParallel and compile prefixes
    dp = nn.DataParallel(net).state_dict()
    torch.save(dp, p("dp.pt"))
    extract("DataParallel state_dict as it is", p("dp.pt"), "dp.out.pt", [], dp)
    extract("DataParallel state_dict, --strip-prefix", p("dp.pt"), "dp.strip.pt", ["--strip-prefix"], sd,
            after=tied)
    extract("DataParallel state_dict to safetensors, --strip-prefix", p("dp.pt"), "dp.strip.safetensors",
            ["--strip-prefix"], sd)
    # every surgery option on extract, in its order: choose, strip, rename, add
    allwant = OrderedDict(("net." + re.sub(r"^blocks\.", "b.", k[len("module."):]), v) for k, v in dp.items()
                          if not k.endswith("num_batches_tracked") and not k.startswith("module.half."))
    extract("extract with --drop, --only-keys, --strip-prefix, --rename, --add-prefix", p("dp.pt"), "dp.all.pt",
            ["--drop", "*.num_batches_tracked", "--only-keys", "module.[a-h]*", "--drop", "module.half.*",
             "--strip-prefix", "--rename", r"^blocks\.=b.", "--add-prefix", "net."], allwant)
    extract("extract: two keys renamed onto one is an error naming both", p("dp.pt"), "dp.clash.pt",
            ["--rename", r"\.(weight|bias)$=.p"], None, expect_rc=2,
            needles=("'module.blocks.0.weight'", "'module.blocks.0.bias'", "'module.blocks.0.p'"))
    if hasattr(torch, "compile"):
        comp = torch.compile(net).state_dict()
    else:
        comp = OrderedDict(("_orig_mod." + k, v) for k, v in sd.items())
    torch.save(comp, p("compiled.pt"))
    extract("torch.compile state_dict, --strip-prefix", p("compiled.pt"), "compiled.out.pt", ["--strip-prefix"], sd)
    # round trip through safetensors with the prefix put back
    rc, _, err = run(tool, "convert", p("dp.strip.safetensors"), p("dp.back.pt"), "--add-prefix", "module.")
    check("safetensors back to .pt with --add-prefix module.", ["exit %d: %s" % (rc, err.strip())] if rc
          else same(load(p("dp.back.pt")), dp))

    # a Lightning-style checkpoint
    torch.manual_seed(2)
    small = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    opt = torch.optim.Adam(small.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    small(torch.randn(5, 6)).sum().backward()
    opt.step()
    sched.step()
    lsd = OrderedDict(("model." + k, v) for k, v in small.state_dict().items())
    ck = OrderedDict([("epoch", 4), ("global_step", 80), ("pytorch-lightning_version", "2.4.0"), ("state_dict", lsd),
                      ("optimizer_states", [opt.state_dict()]), ("lr_schedulers", [sched.state_dict()]),
                      ("callbacks", {"ModelCheckpoint": {"best_model_score": torch.tensor(0.5)}}),
                      ("hyper_parameters", {"lr": 1e-3, "hidden": 4})])
    torch.save(ck, p("lightning.ckpt"))
    extract("Lightning checkpoint: state_dict taken, the rest left behind and listed", p("lightning.ckpt"),
            "lightning.pt", [], lsd, needles=("from 'state_dict'", "left behind", "optimizer_states (list, ",
                                              "hyper_parameters (dict)", "lr_schedulers (list)", "epoch (int)"))
    extract("Lightning checkpoint to safetensors, --strip-prefix", p("lightning.ckpt"), "lightning.safetensors",
            ["--strip-prefix"], small.state_dict())
    extract("Lightning checkpoint as a .safetensors set", p("lightning.ckpt"), "st-set/model.safetensors.index.json",
            ["--strip-prefix", "--max-shard-size", "40"], small.state_dict())
    extract("Lightning checkpoint as a .bin set", p("lightning.ckpt"), "bin-set/pytorch_model.bin.index.json",
            ["--max-shard-size", "40"], lsd)
    castwant = OrderedDict((k, v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in lsd.items())
    extract("--dtype bfloat16 as torch's .to(bfloat16)", p("lightning.ckpt"), "lightning.bf16.pt",
            ["--dtype", "bfloat16"], castwant)
    extract("--from optimizer_states.0.state takes what it is told", p("lightning.ckpt"), "opt.pt",
            ["--from", "optimizer_states.0.state"],
            OrderedDict(("%s.%s" % (i, k), v) for i, st in opt.state_dict()["state"].items() for k, v in st.items()))

    # EMA: two candidates, never a guess
    ema = Net()
    ema.load_state_dict(sd)
    with torch.no_grad():
        for t in ema.parameters():
            t.mul_(0.5)
    esd = ema.state_dict()
    torch.save({"epoch": 1, "model": sd, "model_ema": esd, "optimizer": opt.state_dict()}, p("ema.pt"))
    extract("EMA checkpoint without a choice: exit 2 listing both", p("ema.pt"), "ema.none.pt", [], None,
            expect_rc=2, needles=("2 sets of weights", "--from model ", "--from model_ema", "EMA"))
    extract("--ema takes the EMA copy", p("ema.pt"), "ema.pt.out.pt", ["--ema"], esd, after=tied)
    extract("--from model takes the model", p("ema.pt"), "model.out.safetensors", ["--from", "model"], sd)
    extract("--ema where there is none: exit 2", p("dp.pt"), "noema.pt", ["--ema"], None, expect_rc=2,
            needles=("no EMA copy",))

    # torch.save(model) whose classes are gone
    gone = os.path.join(out, "modules")
    os.makedirs(gone)
    model, remove = throwaway_model(gone, 3)
    want = model.state_dict()
    torch.save(model, p("model.pt"))
    torch.save({"epoch": 2, "model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1).state_dict()},
               p("model-in-dict.pt"))
    torch.save([model], p("model-in-list.pt"))
    remove()
    try:
        torch.load(p("model.pt"), map_location="cpu", weights_only=False) if torch_verify._torch_load_has(
            "weights_only") else torch.load(p("model.pt"), map_location="cpu")
        check("the model's classes are gone before tensorctl runs", ["torch.load still finds them"])
    except Exception as e:  # noqa: BLE001
        check("the model's classes are gone before tensorctl runs (%s)" % type(e).__name__, [])
    extract("torch.save(model): state_dict(), classes gone", p("model.pt"), "model.out.pt", [], want, after=tied)
    extract("torch.save(model) to safetensors", p("model.pt"), "whole-model.out.safetensors", [], want)
    extract("a pickled model under 'model' of a training dict", p("model-in-dict.pt"), "model-in-dict.out.pt", [],
            want, after=tied)
    extract("a pickled model inside a list", p("model-in-list.pt"), "model-in-list.out.pt", [], want)
    half = Net().half()
    torch.save(half.state_dict(), p("half.pt"))
    extract("a float16 model", p("half.pt"), "half.out.pt", [], half.state_dict(), after=tied)

    # TorchScript
    torch.manual_seed(4)
    sm = Scripted().eval()
    for kind, s in (("scripted", torch.jit.script(sm)), ("traced", torch.jit.trace(sm, torch.randn(4, 3)))):
        s.save(p(kind + ".pt"))
        jwant = torch.jit.load(p(kind + ".pt")).state_dict()
        extract("TorchScript %s: torch.jit.load(f).state_dict()" % kind, p(kind + ".pt"), kind + ".out.pt", [],
                jwant)
        extract("TorchScript %s to safetensors" % kind, p(kind + ".pt"), kind + ".out.safetensors", [], jwant)
        rc, _, err = run(tool, "inspect", p(kind + ".pt"))
        check("TorchScript %s: inspect says unsafe, and why" % kind,
              [] if rc == 4 and "TorchScript archive" in err and "torch.jit.load" in err
              else ["exit %d: %s" % (rc, err.strip())])
        rc, _, err = run(tool, "to-cpu", "--allow-unsafe", p(kind + ".pt"), "-o", p(kind + ".cpu.pt"))
        check("TorchScript %s: a whole rewrite is refused, pointing to extract" % kind,
              [] if rc == 2 and "extract" in err and not os.path.exists(p(kind + ".cpu.pt"))
              else ["exit %d: %s" % (rc, err.strip())])

    # the samples of make_extract_samples.py, made by another torch maybe
    for name, opts in (("pickled_module_cuda0.pt", []), ("lightning_dp_cpu.ckpt", []), ("train_ema_cpu.pt", ["--ema"])):
        path = os.path.join(samples, name)
        with open(path + ".expect.json") as f:
            exp = json.load(f)["tensors"]
        prefix = {"lightning_dp_cpu.ckpt": "state_dict.", "train_ema_cpu.pt": "model_ema."}.get(name, "")
        wants = {".".join(e["path"])[len(prefix):]: e for e in exp if ".".join(e["path"]).startswith(prefix)}
        rc, _, err = run(tool, "extract", path, "-o", p(name + ".out.pt"), *opts)
        probs = ["exit %d: %s" % (rc, err.strip())] if rc else []
        if not probs:
            got = load(p(name + ".out.pt"))
            if sorted(got) != sorted(wants):
                probs.append("names %s, want %s" % (sorted(got)[:4], sorted(wants)[:4]))
            for k, e in wants.items():
                if k in got and (hashlib.sha256(torch_verify.tensor_bytes(got[k])).hexdigest() != e["sha256"]
                                 or torch_verify.dtype_name(got[k].dtype) != e["dtype"]
                                 or list(got[k].shape) != e["shape"]):
                    probs.append("%s differs from what was saved" % k)
        check("sample %s against its expect file" % name, probs)
    for name in ("torchscript_scripted.pt", "torchscript_traced.pt"):
        path = os.path.join(samples, name)
        extract("sample %s against torch.jit.load" % name, path, name + ".out.pt", [],
                torch.jit.load(path).state_dict())

    # inspect --json says the same facts
    rc, so, _ = run(tool, "inspect", "--json", p("lightning.ckpt"))
    try:
        wj = json.loads(so)["weights"]
        c = wj["candidates"][0]
        probs = [] if (wj["kind"] == "training checkpoint" and c["from"] == "state_dict" and c["tensors"] == len(lsd)
                       and c["shared_prefix"] == "model." and wj["optimizer_bytes"] > 0) else ["weights: %r" % wj]
    except Exception as e:  # noqa: BLE001
        probs = ["inspect --json: %s" % e]
    check("inspect --json: training checkpoint, weights under 'state_dict', optimizer bytes, shared prefix", probs)
    rc, so, _ = run(tool, "inspect", p("model.pt"))
    check("inspect: the pickled module's class and what extract gives",
          [] if re.search(r"weights: pickled module tensorctl_gone_3\.Net; extract gives %d tensors" % len(want), so)
          else ["%r" % [ln for ln in so.splitlines() if ln.startswith("weights")]])

    print("%d passed, %d failed" % (passed, failed))
    if passed == 0:
        print("FAIL: no check ran")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
