#!/usr/bin/env python3
"""extract against real torch: every output must load with torch.load(weights_only=True) and equal,
tensor for tensor and bit for bit, what model.state_dict() (or the entry taken) gave at save time.

    check_extract.py [--only FEATURE[,FEATURE...]] TENSORCTL OUTDIR SAMPLES_DIR
    check_extract.py --features     the features (FEATURES below), one a line

Inputs are made here, with the torch running this script, in OUTDIR/<feature>/<torch version>/
(each feature makes the ones it judges):
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
import json
import os
import re
import shlex
import sys
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sample_models"))
from judge import Report, features, out_dir, run, torch_or_skip  # noqa: E402

# One meson test per feature (torch-extract/FEATURE). --features is answered before torch is
# imported: meson asks at configure time, with a Python that may lack it.
FEATURES = ["prefixes", "lightning", "ema", "pickled-modules", "torchscript", "samples", "inspect"]
ONLY, ARGV = features(sys.argv[1:], FEATURES)

torch = torch_or_skip()
import torch.nn as nn  # noqa: E402
import torch_verify  # noqa: E402
from st_read import read_tensors  # noqa: E402
from make_extract_samples import MODELS_SRC  # noqa: E402  (the model of pickled_module_cuda0.pt)
from sample_common import throwaway_module  # noqa: E402


def load(path):
    if path.endswith(".safetensors"):
        return read_tensors(path)
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


def shares(got, a, b):
    pa = torch_verify.storage_ptr(got[a])
    return [] if pa is not None and pa == torch_verify.storage_ptr(got[b]) else ["%s and %s are two storages"
                                                                                 % (a, b)]


class Net(nn.Module):
    """A model like MODELS_SRC's, defined here (for state_dicts)."""

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


class Case:
    """One feature's run: its folder (OUTDIR/FEATURE/torch-VERSION), the tool, the report, and the
    inputs it makes when a check first needs them (each from its own seed, so that a feature run
    alone makes them as the whole run does)."""

    def __init__(self, tool, base, samples, feature, rep):
        self.tool, self.samples, self.rep = tool, samples, rep
        self.out = out_dir(os.path.join(base, feature), torch)
        self.made = {}

    def p(self, name):
        return os.path.join(self.out, name)

    def once(self, name, make):
        if name not in self.made:
            self.made[name] = make()
        return self.made[name]

    def extract(self, what, inp, outname, opts, want, plain=True, expect_rc=0, needles=(), after=None):
        dst = self.p(outname)
        rc, _, err = run(self.tool, "extract", inp, "-o", dst, *opts)
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
                probs += torch_verify.same_tensors(got, want, plain)
                if after:
                    probs += after(got)
        elif expect_rc and os.path.exists(dst):
            probs.append("wrote %s" % dst)
        self.rep.check(what, probs)
        return got

    # ---- the inputs -------------------------------------------------------------------------

    def net(self):
        """Net's state_dict (seed 1, its batch norm run once)."""
        def make():
            torch.manual_seed(1)
            net = Net()
            with torch.no_grad():
                net.bn(torch.randn(4, 8))
            return net
        return self.once("net", make)

    def dp(self):
        """dp.pt: the state_dict of Net wrapped in nn.DataParallel ('module.')."""
        def make():
            dp = nn.DataParallel(self.net()).state_dict()
            torch.save(dp, self.p("dp.pt"))
            return dp
        return self.once("dp", make)

    def lightning(self):
        """lightning.ckpt (seed 2): (the model, its optimizer, the state_dict under 'state_dict')."""
        def make():
            torch.manual_seed(2)
            small = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
            opt = torch.optim.Adam(small.parameters(), lr=1e-3)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
            small(torch.randn(5, 6)).sum().backward()
            opt.step()
            sched.step()
            lsd = OrderedDict(("model." + k, v) for k, v in small.state_dict().items())
            ck = OrderedDict([("epoch", 4), ("global_step", 80), ("pytorch-lightning_version", "2.4.0"),
                              ("state_dict", lsd), ("optimizer_states", [opt.state_dict()]),
                              ("lr_schedulers", [sched.state_dict()]),
                              ("callbacks", {"ModelCheckpoint": {"best_model_score": torch.tensor(0.5)}}),
                              ("hyper_parameters", {"lr": 1e-3, "hidden": 4})])
            torch.save(ck, self.p("lightning.ckpt"))
            return small, opt, lsd
        return self.once("lightning", make)

    def pickled(self):
        """model.pt, model-in-dict.pt, model-in-list.pt (seed 3): torch.save of the model of
        pickled_module_cuda0.pt, from a throwaway module gone before tensorctl runs; its state_dict."""
        def make():
            with throwaway_module(MODELS_SRC, "tensorctl_gone_3") as mod:
                torch.manual_seed(3)
                model = mod.Net()
                with torch.no_grad():
                    model.bn(torch.randn(4, 8))
                want = model.state_dict()
                torch.save(model, self.p("model.pt"))
                torch.save({"epoch": 2, "model": model,
                            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1).state_dict()},
                           self.p("model-in-dict.pt"))
                torch.save([model], self.p("model-in-list.pt"))
            return want
        return self.once("pickled", make)


def tied(g):
    return shares(g, "head.weight", "embed.weight")


def feature_prefixes(c):
    """DataParallel's and torch.compile's prefixes, and every key surgery option of extract."""
    p, extract, sd, dp = c.p, c.extract, c.net().state_dict(), c.dp()
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
        comp = torch.compile(c.net()).state_dict()
    else:
        comp = OrderedDict(("_orig_mod." + k, v) for k, v in sd.items())
    torch.save(comp, p("compiled.pt"))
    extract("torch.compile state_dict, --strip-prefix", p("compiled.pt"), "compiled.out.pt", ["--strip-prefix"], sd)
    # round trip through safetensors with the prefix put back
    rc, _, err = run(c.tool, "convert", p("dp.strip.safetensors"), p("dp.back.pt"), "--add-prefix", "module.")
    c.rep.check("safetensors back to .pt with --add-prefix module.", ["exit %d: %s" % (rc, err.strip())] if rc
                else torch_verify.same_tensors(load(p("dp.back.pt")), dp, plain=True))


def feature_lightning(c):
    """A Lightning-style checkpoint: the state_dict taken, as it is, to safetensors, as sets, cast;
    --from anything else."""
    p, extract = c.p, c.extract
    small, opt, lsd = c.lightning()
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


def feature_ema(c):
    """EMA: two candidates, never a guess."""
    p, extract, sd = c.p, c.extract, c.net().state_dict()
    _, opt, _ = c.lightning()
    c.dp()
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


def feature_pickled_modules(c):
    """torch.save(model) whose classes are gone, alone, in a dict, in a list; a float16 model."""
    p, extract = c.p, c.extract
    want = c.pickled()
    mtied = lambda g: shares(g, "heads.lm.weight", "embed.weight")  # noqa: E731
    try:
        torch.load(p("model.pt"), map_location="cpu", weights_only=False) if torch_verify._torch_load_has(
            "weights_only") else torch.load(p("model.pt"), map_location="cpu")
        c.rep.check("the model's classes are gone before tensorctl runs", ["torch.load still finds them"])
    except Exception as e:  # noqa: BLE001
        c.rep.check("the model's classes are gone before tensorctl runs (%s)" % type(e).__name__, [])
    extract("torch.save(model): state_dict(), classes gone", p("model.pt"), "model.out.pt", [], want, after=mtied)
    extract("torch.save(model) to safetensors", p("model.pt"), "whole-model.out.safetensors", [], want)
    extract("a pickled model under 'model' of a training dict", p("model-in-dict.pt"), "model-in-dict.out.pt", [],
            want, after=mtied)
    extract("a pickled model inside a list", p("model-in-list.pt"), "model-in-list.out.pt", [], want)
    half = Net().half()
    torch.save(half.state_dict(), p("half.pt"))
    extract("a float16 model", p("half.pt"), "half.out.pt", [], half.state_dict(), after=tied)


def feature_torchscript(c):
    """TorchScript archives, scripted and traced: extract as torch.jit.load gives; inspect and a whole
    rewrite refuse them."""
    p, extract = c.p, c.extract
    torch.manual_seed(4)
    sm = Scripted().eval()
    for kind, s in (("scripted", torch.jit.script(sm)), ("traced", torch.jit.trace(sm, torch.randn(4, 3)))):
        s.save(p(kind + ".pt"))
        jwant = torch.jit.load(p(kind + ".pt")).state_dict()
        extract("TorchScript %s: torch.jit.load(f).state_dict()" % kind, p(kind + ".pt"), kind + ".out.pt", [],
                jwant)
        extract("TorchScript %s to safetensors" % kind, p(kind + ".pt"), kind + ".out.safetensors", [], jwant)
        rc, _, err = run(c.tool, "inspect", p(kind + ".pt"))
        c.rep.check("TorchScript %s: inspect says unsafe, and why" % kind,
                    [] if rc == 4 and "TorchScript archive" in err and "torch.jit.load" in err
                    else ["exit %d: %s" % (rc, err.strip())])
        rc, _, err = run(c.tool, "to-cpu", "--allow-unsafe", p(kind + ".pt"), "-o", p(kind + ".cpu.pt"))
        c.rep.check("TorchScript %s: a whole rewrite is refused, pointing to extract" % kind,
                    [] if rc == 2 and "extract" in err and not os.path.exists(p(kind + ".cpu.pt"))
                    else ["exit %d: %s" % (rc, err.strip())])


def feature_samples(c):
    """The samples of make_extract_samples.py, made by another torch maybe."""
    p, extract = c.p, c.extract
    for name, opts in (("pickled_module_cuda0.pt", []), ("lightning_dp_cpu.ckpt", []), ("train_ema_cpu.pt", ["--ema"])):
        path = os.path.join(c.samples, name)
        with open(path + ".expect.json") as f:
            exp = json.load(f)["tensors"]
        prefix = {"lightning_dp_cpu.ckpt": "state_dict.", "train_ema_cpu.pt": "model_ema."}.get(name, "")
        wants = {".".join(e["path"])[len(prefix):]: e for e in exp if ".".join(e["path"]).startswith(prefix)}
        rc, _, err = run(c.tool, "extract", path, "-o", p(name + ".out.pt"), *opts)
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
        c.rep.check("sample %s against its expect file" % name, probs)
    for name in ("torchscript_scripted.pt", "torchscript_traced.pt"):
        path = os.path.join(c.samples, name)
        extract("sample %s against torch.jit.load" % name, path, name + ".out.pt", [],
                torch.jit.load(path).state_dict())


def feature_inspect(c):
    """inspect says the facts extract goes by: a training checkpoint's weights, a pickled module's class."""
    _, _, lsd = c.lightning()
    want = c.pickled()
    rc, so, _ = run(c.tool, "inspect", "--json", c.p("lightning.ckpt"))
    try:
        wj = json.loads(so)["weights"]
        cand = wj["candidates"][0]
        probs = [] if (wj["kind"] == "training checkpoint" and cand["from"] == "state_dict"
                       and cand["tensors"] == len(lsd) and cand["shared_prefix"] == "model."
                       and wj["optimizer_bytes"] > 0) else ["weights: %r" % wj]
    except Exception as e:  # noqa: BLE001
        probs = ["inspect --json: %s" % e]
    c.rep.check("inspect --json: training checkpoint, weights under 'state_dict', optimizer bytes, shared prefix", probs)
    rc, so, _ = run(c.tool, "inspect", c.p("model.pt"))
    c.rep.check("inspect: the pickled module's class and what extract gives",
                [] if re.search(r"weights: pickled module tensorctl_gone_3\.Net; extract gives %d tensors" % len(want), so)
                else ["%r" % [ln for ln in so.splitlines() if ln.startswith("weights")]])


FEATURE_RUNS = {"prefixes": feature_prefixes, "lightning": feature_lightning, "ema": feature_ema,
                "pickled-modules": feature_pickled_modules, "torchscript": feature_torchscript,
                "samples": feature_samples, "inspect": feature_inspect}


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tool, base, samples = shlex.split(argv[0]), argv[1], argv[2]
    rep = Report()
    for feature in ONLY:
        print("# %s" % feature)
        c = Case(tool, base, samples, feature, rep)
        FEATURE_RUNS[feature](c)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main(ARGV))
