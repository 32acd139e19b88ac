#!/usr/bin/env python3
"""Write a DeepSpeed ZeRO-2 save folder as DeepSpeed 0.19 writes it, at any size, with torch alone.

    make_bench_zero.py OUT [--ranks 2] [--layers 16] [--dim 4096] [--vocab 32000] [--bf16] [--no-moments]
    make_bench_zero.py --check REAL_SAVE_FOLDER

The model: an embedding tied to the output head, then per layer a square Linear (weight and bias)
and a LayerNorm, two optimizer groups (weights with decay; biases and norms without), a float and
an int64 buffer. The files follow what DeepSpeed's ZeRO-2 optimizer saves (docs of the format:
shared/docs/zero-format.md): mp_rank_00_model_states.pt with the module's state_dict in the
training dtype, buffer_names, param_shapes, frozen and shared parameters; one
zero_pp_rank_R_mp_rank_00_optim_states.pt per rank with its slice of each group's fp32 flat buffer
(padded to a multiple of 2 * ranks, the padding cut from the saved slice and counted in
group_paddings), Adam's moments of the padded slice, a LossScaler, ZeroStageEnum(2) and
fragment_address records. DeepSpeed's classes are pickled under their own names from stand-ins
(this script needs no DeepSpeed).

The defaults make 16 * 4096 * 4096 + 32000 * 4096 parameters: 1.6 GB of fp32 master weights over 2
ranks (plus 3.2 GB of moments, and the module copy). --check makes the same files at the shapes of a
real ZeRO-2 save folder and compares what they hold with the real ones: keys, the kinds of values,
the globals they name, every tensor's shape and dtype, the paddings. Values are random.
"""
import argparse
import collections
import dataclasses
import enum
import glob
import io
import os
import pickletools
import sys
import types
import zipfile

import torch


def stand_in(module, name, cls):
    """A class that pickles as module.name, registered where pickle looks it up."""
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    cls.__module__, cls.__qualname__, cls.__name__ = module, name, name
    setattr(sys.modules[module], name, cls)
    return cls


class _LossScaler:
    def __init__(self, scale=1.0):
        self.cur_scale = scale
        self.dynamic = False


LossScaler = stand_in("deepspeed.runtime.fp16.loss_scaler", "LossScaler", _LossScaler)
ZeroStageEnum = stand_in("deepspeed.runtime.zero.config", "ZeroStageEnum",
                         enum.IntEnum("ZeroStageEnum", {"disabled": 0, "optimizer_states": 1, "gradients": 2,
                                                        "weights": 3}))
# pickled as ZeroStageEnum(2), as DeepSpeed's files hold it, under every Python (some pickle an enum
# member as getattr(ZeroStageEnum, 'gradients') at torch.save's protocol 2)
ZeroStageEnum.__reduce_ex__ = lambda self, proto: (type(self), (int(self),))
fragment_address = stand_in("deepspeed.utils.tensor_fragment", "fragment_address",
                            dataclasses.make_dataclass("fragment_address", [("numel", int), ("start", int)]))


def model(layers, dim, vocab):
    """name -> shape for groups 0 (decay) and 1 (no decay), in flat-buffer order; buffers."""
    g0, g1 = collections.OrderedDict(emb_weight=(vocab, dim)), collections.OrderedDict()
    for i in range(layers):
        g0["layers.%d.fc.weight" % i] = (dim, dim)
        g1["layers.%d.fc.bias" % i] = (dim,)
        g1["layers.%d.ln.weight" % i] = (dim,)
        g1["layers.%d.ln.bias" % i] = (dim,)
    g0 = collections.OrderedDict(("emb.weight" if k == "emb_weight" else k, v) for k, v in g0.items())
    return [g0, g1], {"pos": torch.randn(16, dim), "counts": torch.arange(7)}


def numel(s):
    n = 1
    for x in s:
        n *= x
    return n


def write(out, groups, buffers, ranks, train, moments, gen):
    step = os.path.join(out, "global_step1")
    os.makedirs(step, exist_ok=True)
    with open(os.path.join(out, "latest"), "w") as f:
        f.write("global_step1")
    config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2},
              "bf16": {"enabled": train == torch.bfloat16}}
    align = 2 * ranks
    flats = []
    for g in groups:  # the fp32 master weights of each group, padded at the end
        total = sum(numel(s) for s in g.values())
        padded = (total + align - 1) // align * align
        flat = torch.zeros(padded)
        flat[:total].uniform_(-1, 1, generator=gen)
        flats.append((flat, total, padded))
    module = collections.OrderedDict()
    for k, v in buffers.items():
        if k == "pos":
            module[k] = v
    off = [0, 0]
    for gi, g in enumerate(groups):
        for k, s in g.items():
            module[k] = flats[gi][0][off[gi]:off[gi] + numel(s)].view(s).to(train).clone()
            off[gi] += numel(s)
    module["counts"] = buffers["counts"]
    module["head.weight"] = module["emb.weight"]
    sd = collections.OrderedDict()
    sd["module"] = module
    sd["buffer_names"] = list(buffers)
    sd["optimizer"] = None
    sd["param_shapes"] = [collections.OrderedDict((k, torch.Size(s)) for k, s in g.items()) for g in groups]
    sd["frozen_param_shapes"] = collections.OrderedDict()
    sd["shared_params"] = {"head.weight": "emb.weight"}
    sd["frozen_param_fragments"] = {}
    for k in ("lr_scheduler", "data_sampler", "random_ltd"):
        sd[k] = None
    sd.update(skipped_steps=0, global_steps=1, global_samples=ranks, dp_world_size=ranks, mp_world_size=1,
              checkpoint_parallel_dimensions={"pp_degree": 1, "tp_degree": 1}, ds_config=config, ds_version="0.19.8")
    torch.save(sd, os.path.join(step, "mp_rank_00_model_states.pt"))
    del sd, module
    for r in range(ranks):
        parts, pads, mappings, state = [], [], [], {}
        for gi, (flat, total, padded) in enumerate(flats):
            size = padded // ranks
            lo, hi = r * size, (r + 1) * size
            lean = min(hi, total) - lo if lo < total else 0
            # the saved slice is the rank's partition less its padding, a view of it: its record holds the
            # padding too (seen in DeepSpeed 0.19.8's files: 52331 elements of a 52332-element record)
            parts.append(flat[lo:hi].clone()[:lean])
            pads.append(size - lean)
            m, at = collections.OrderedDict(), 0
            for k, s in groups[gi].items():
                a, b = max(at, lo), min(at + numel(s), hi)
                if a < b:
                    m[k] = fragment_address(numel=b - a, start=a - lo)
                at += numel(s)
            mappings.append(m)
            st = {"step": torch.tensor(1.0)}
            if moments:
                st["exp_avg"] = torch.zeros(size)
                st["exp_avg_sq"] = torch.zeros(size)
            state[gi] = st
        base = {"state": state, "param_groups": [
            {"weight_decay": 0.01 if gi == 0 else 0.0, "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8,
             "amsgrad": False, "params": [gi]} for gi in range(len(flats))]}
        osd = collections.OrderedDict()
        osd["loss_scaler"] = LossScaler(1.0)
        osd["dynamic_loss_scale"] = False
        osd["overflow"] = False
        osd["clip_grad"] = 1.0
        osd["base_optimizer_state"] = base
        osd["single_partition_of_fp32_groups"] = parts
        osd["zero_stage"] = ZeroStageEnum(2)
        osd["group_paddings"] = pads
        osd["param_alignment_paddings"] = [[0] * len(g) for g in groups]
        osd["partition_count"] = [ranks] * len(groups)
        osd["ds_version"] = "0.19.8"
        osd["param_slice_mappings"] = mappings
        name = "%szero_pp_rank_%d_mp_rank_00_optim_states.pt" % ("bf16_" if train == torch.bfloat16 else "", r)
        torch.save({"optimizer_state_dict": osd, "ds_config": config, "ds_version": "0.19.8"},
                   os.path.join(step, name))


def summary(path):
    """What a file holds, without its values: keys and kinds down the tree, tensors as dtype[shape], globals."""
    with zipfile.ZipFile(path) as z:
        pkl = z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
    names = set()
    for op, arg, _ in pickletools.genops(pkl):
        if op.name == "GLOBAL":
            names.add(arg.replace(" ", "."))
    obj = torch.load(path, map_location="cpu", weights_only=False)

    def walk(o):
        if isinstance(o, torch.Tensor):  # with the elements of its storage (its record)
            st = o.untyped_storage() if hasattr(o, "untyped_storage") else o.storage()
            return "%s%s of %d" % (str(o.dtype)[6:], list(o.shape), st.nbytes() // o.element_size())
        if isinstance(o, dict):
            return {str(k): walk(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [walk(v) for v in o]
        if isinstance(o, (int, float, str, bool)) or o is None:
            return type(o).__name__
        return type(o).__name__
    return walk(obj), sorted(names)


def check(real):
    tag = open(os.path.join(real, "latest")).read().strip()
    step = os.path.join(real, tag)
    m = torch.load(os.path.join(step, "mp_rank_00_model_states.pt"), map_location="cpu", weights_only=True)
    ranks = m["dp_world_size"]
    groups = [collections.OrderedDict((k, tuple(s)) for k, s in g.items()) for g in m["param_shapes"]]
    train = next(v.dtype for k, v in m["module"].items() if k not in m["buffer_names"])
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "make_bench_zero_check")
    import shutil
    shutil.rmtree(out, ignore_errors=True)
    write(out, groups, {k: m["module"][k] for k in m["buffer_names"]}, ranks, train, True, torch.Generator())
    bad = 0
    for f in sorted(glob.glob(os.path.join(step, "*_optim_states.pt"))):
        mine = os.path.join(out, "global_step1", os.path.basename(f))
        a, b = summary(f), summary(mine)
        skip = ("ds_config", "clip_grad", "base_optimizer_state")  # the user's config and optimizer choice
        sa = {k: v for k, v in a[0]["optimizer_state_dict"].items() if k not in skip}
        sb = {k: v for k, v in b[0]["optimizer_state_dict"].items() if k not in skip}
        same = sa == sb and list(a[0]["optimizer_state_dict"]) == list(b[0]["optimizer_state_dict"])
        ga = [g for g in a[1] if g.startswith("deepspeed")]
        gb = [g for g in b[1] if g.startswith("deepspeed")]
        print("%s: %s" % (os.path.basename(f), "same structure, shapes and DeepSpeed globals" if same and ga == gb
                          else "DIFFERS"))
        if not same or ga != gb:
            bad += 1
            print("  real:", sa, ga)
            print("  made:", sb, gb)
    ra, rb = summary(os.path.join(step, "mp_rank_00_model_states.pt")), \
        summary(os.path.join(out, "global_step1", "mp_rank_00_model_states.pt"))
    keys_same = list(ra[0]) == list(rb[0]) and ra[0]["param_shapes"] == rb[0]["param_shapes"]
    print("mp_rank_00_model_states.pt: %s" % ("same keys and param_shapes" if keys_same else "DIFFERS"))
    shutil.rmtree(out, ignore_errors=True)
    return 1 if bad or not keys_same else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--no-moments", action="store_true")
    ap.add_argument("--check", metavar="REAL_SAVE_FOLDER")
    a = ap.parse_args()
    if a.check:
        return check(a.check)
    if not a.out:
        ap.error("give OUT")
    groups, buffers = model(a.layers, a.dim, a.vocab)
    write(a.out, groups, buffers, a.ranks, torch.bfloat16 if a.bf16 else torch.float32, not a.no_moments,
          torch.Generator().manual_seed(7))
    return 0


if __name__ == "__main__":
    sys.exit(main())
