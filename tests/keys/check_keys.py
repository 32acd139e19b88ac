#!/usr/bin/env python3
"""Key surgery (--strip-prefix, --add-prefix, --rename, --drop, --only-keys) against real torch.

    check_keys.py TENSORCTL OUTDIR DATAPARALLEL_PT

Writes its own inputs with torch into OUTDIR: the state_dict of a model wrapped in
nn.DataParallel (keys "module."), one with torch.compile's "_orig_mod." prefix, a
state_dict with tied weights; DATAPARALLEL_PT is a DataParallel checkpoint of the corpus.
Every output is judged by torch: the .pt outputs with torch.load(weights_only=True), the
.safetensors outputs by reading their header and bytes here (a few lines of Python, not
tensorctl), and the tensors must equal the input's under the names the options give, bit
for bit. A collision, an empty name, a bad regex and a prefix that no name shares are
errors (exit 2) that name what is wrong and write nothing.

One line per check, then a count; exit 1 on any failure, 77 when torch is missing.
"""

import os
import re
import shlex
import sys
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
from st_read import read_tensors  # noqa: E402
from torch_verify import same_tensors  # noqa: E402


def load(path):
    if path.endswith(".safetensors"):
        return read_tensors(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch before weights_only
        return torch.load(path, map_location="cpu")


def make_inputs(out):
    torch.manual_seed(7)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = torch.nn.Linear(4, 3)
            self.norm = torch.nn.BatchNorm1d(3)
            self.head = torch.nn.Linear(3, 2)

    net = Net()
    dp = torch.nn.DataParallel(net).state_dict()  # keys "module.*", as DataParallel saves them
    torch.save(dp, os.path.join(out, "dp.pt"))
    compiled = OrderedDict(("_orig_mod." + k, v) for k, v in net.state_dict().items())
    torch.save(compiled, os.path.join(out, "compiled.pt"))
    w = torch.randn(5, 4)
    tied = OrderedDict([("model.embed.weight", w), ("model.lm_head.weight", w), ("model.bias", torch.randn(5))])
    torch.save(tied, os.path.join(out, "tied.pt"))
    return {"dp": dp, "compiled": compiled, "tied": tied}


def renamed(sd, fn):
    return OrderedDict((fn(k), v) for k, v in sd.items() if fn(k) is not None)


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tool, out, corpus_dp = shlex.split(argv[1]), argv[2], argv[3]
    os.makedirs(out, exist_ok=True)
    src = make_inputs(out)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    rep = Report()

    def case(what, inp, outname, opts, want):
        dst = p(outname)
        if os.path.exists(dst):
            os.unlink(dst)
        rc, _, err = run(tool, "convert", "-q", p(inp) if not os.path.isabs(inp) else inp, dst, *opts)
        if rc != 0:
            rep.check(what, ["exit %d: %s" % (rc, err.strip())])
            return None
        got = load(dst)
        rep.check(what, same_tensors(got, want))
        return got

    dp, comp, tied = src["dp"], src["compiled"], src["tied"]
    strip_module = renamed(dp, lambda k: k[len("module."):])
    # --strip-prefix, with and without P, to safetensors
    case("strip-prefix (shared 'module.') to safetensors", "dp.pt", "dp.safetensors", ["--strip-prefix"],
         strip_module)
    case("strip-prefix (shared '_orig_mod.') to safetensors", "compiled.pt", "comp.safetensors",
         ["--strip-prefix"], renamed(comp, lambda k: k[len("_orig_mod."):]))
    case("strip-prefix=module.enc. takes only that prefix", "dp.pt", "dp-enc.safetensors",
         ["--strip-prefix=module.enc."], renamed(dp, lambda k: k[len("module.enc."):] if k.startswith("module.enc.")
                                                 else k))
    # --add-prefix, and the way back: safetensors -> .pt with the prefix put back
    case("add-prefix", "dp.safetensors", "dp-back.pt", ["--add-prefix", "module."], dp)
    case("add-prefix to safetensors", "dp.safetensors", "dp-model.safetensors", ["--add-prefix=model."],
         renamed(strip_module, lambda k: "model." + k))
    # --rename: POSIX ERE, groups, in order, the first match only
    case("rename with groups", "dp.pt", "dp-rn.safetensors",
         ["--rename", r"^module\.(enc|head)\.(.*)$=\1_layer.\2"],
         renamed(dp, lambda k: re.sub(r"^module\.(enc|head)\.(.*)$", r"\1_layer.\2", k, count=1)))
    case("rename applied in order, after strip-prefix", "dp.pt", "dp-rn2.safetensors",
         ["--strip-prefix", "--rename", "e=E", "--rename", "E(n|a)=X\\1"],
         renamed(strip_module, lambda k: re.sub("E(n|a)", r"X\1", re.sub("e", "E", k, count=1), count=1)))
    case("rename: '\\=' is a literal '=', in REPL and in REGEX", "dp.safetensors", "dp-eq.safetensors",
         ["--rename", "^enc\\.=a\\=b.", "--rename", "^a\\=b\\.w=x.w"],
         renamed(strip_module, lambda k: re.sub(r"^a=b\.w", "x.w", re.sub(r"^enc\.", "a=b.", k))))
    # --drop and --only-keys choose on the names as they are, before any renaming
    case("drop", "dp.pt", "dp-drop.safetensors", ["--drop", "*.num_batches_tracked", "--drop", "module.head.*"],
         OrderedDict((k, v) for k, v in dp.items() if not k.endswith("num_batches_tracked")
                     and not k.startswith("module.head.")))
    case("only-keys then strip-prefix", "dp.pt", "dp-only.safetensors", ["--only-keys", "module.enc.*",
                                                                         "--strip-prefix"],
         OrderedDict((k[len("module."):], v) for k, v in dp.items() if k.startswith("module.enc.")))
    case("only-keys and drop from safetensors", "dp.safetensors", "dp-only2.safetensors",
         ["--only-keys", "norm.*", "--drop", "norm.running_*"],
         OrderedDict((k, v) for k, v in strip_module.items() if k.startswith("norm.")
                     and not k.startswith("norm.running_")))
    # every option together, the whole order: select, strip, rename, add
    case("all options together", "dp.pt", "dp-all.safetensors",
         ["--drop", "*tracked", "--strip-prefix", "--rename", r"^norm\.=bn.", "--add-prefix", "net."],
         OrderedDict(("net." + re.sub(r"^norm\.", "bn.", k[len("module."):]), v) for k, v in dp.items()
                     if not k.endswith("tracked")))
    # tied weights keep one storage through a renaming round trip
    got = case("strip-prefix keeps tied weights (safetensors)", "tied.pt", "tied.safetensors",
               ["--strip-prefix"], renamed(tied, lambda k: k[len("model."):]))
    got = case("round trip back to .pt with add-prefix", "tied.safetensors", "tied-back.pt",
               ["--add-prefix", "model."], tied)
    if got is not None:
        rep.check("tied weights share a storage after the round trip",
              [] if got["model.embed.weight"].data_ptr() == got["model.lm_head.weight"].data_ptr()
              else ["model.embed.weight and model.lm_head.weight are two storages"])
    # the corpus's DataParallel checkpoint
    want = torch.load(corpus_dp, map_location="cpu")
    case("corpus DataParallel checkpoint, strip-prefix", corpus_dp, "corpus-dp.safetensors", ["--strip-prefix"],
         renamed(want, lambda k: k[len("module."):]))

    # errors: exit 2, one line naming what is wrong, nothing written
    def refused(what, inp, opts, needles):
        dst = p("refused.safetensors")
        if os.path.exists(dst):
            os.unlink(dst)
        rc, _, err = run(tool, "convert", p(inp), dst, *opts)
        probs = []
        if rc != 2:
            probs.append("exit %d, want 2" % rc)
        for n in needles:
            if n not in err:
                probs.append("stderr lacks %r: %r" % (n, err.strip()))
        if os.path.exists(dst):
            probs.append("wrote %s" % dst)
        rep.check(what, probs)

    refused("collision names both tensors", "dp.pt", ["--rename", r"\.(weight|bias)$=.p"],
            ["'module.enc.weight'", "'module.enc.bias'", "'module.enc.p'"])
    refused("collision through strip-prefix", "tied.pt", ["--strip-prefix", "--rename", "embed=lm_head"],
            ["'model.embed.weight'", "'model.lm_head.weight'"])
    refused("empty name", "dp.pt", ["--rename", ".*="], ["would have no name left"])
    refused("regex that does not compile", "dp.pt", ["--rename", "(=x"], ["--rename '(=x'"])
    refused("rename without '='", "dp.pt", ["--rename", "abc"], ["REGEX=REPL"])
    refused("no shared prefix to strip", "dp.safetensors", ["--strip-prefix"], ["share no first component"])
    refused("strip-prefix= with no P", "dp.pt", ["--strip-prefix="], ["--strip-prefix="])

    return rep.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
