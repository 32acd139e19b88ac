#!/usr/bin/env python3
"""Write the repository's own corpus of real-torch files, the ones the core tests judge, each with
NAME.expect.json beside it (the schema of make_samples.py and of the reference corpus).

Run once with each torch, which writes its own folder:

    /usr/bin/python3 sample_models/make_corpus.py           torch 1.x -> corpus/torch-1.13/ and the
                                                            .bin set of sharded/
    PY_WITH_TORCH_2 sample_models/make_corpus.py            torch 2.x -> corpus/torch-2.15/ (also
                                                            needs numpy and safetensors) and the
                                                            .safetensors set of sharded/

corpus/torch-X.Y/ (X.Y the running torch's version; a newer torch writes a folder of its own):

  lm_cuda0.pt, lm_cpu.pt      a small language model's state_dict (TinyLM: an embedding, two blocks of
                              LayerNorm and Linear layers, a head tied to the embedding), tagged cuda:0
                              and cpu
  train_ckpt_cuda.pt          a training checkpoint: the model, AdamW state after 3 steps (step
                              tensors, moments), a config of ints, floats, None, bools, tuples,
                              lists and strings, and the RNG state (a uint8 tensor), tagged cuda:0
  mixed_devices.pt            six storages round-robin over cuda:0, cuda:1 and cpu
  dtypes_views.pt             every common dtype; 0-d, empty, views of one storage with offsets and
                              strides; inf, nan, -0.0, subnormals; tagged cuda:0
  dataparallel_cuda1.pt       nn.DataParallel's 'module.' prefixes, tagged cuda:1, one nn.Parameter
  legacy_cuda0.pt             the pre-1.6 format (_use_new_zipfile_serialization=False)
  lightning_style_cuda0.ckpt  a Lightning-style .ckpt: state_dict ('model.' prefixes),
                              optimizer_states, lr_schedulers, callbacks, hyper-parameters in a class
                              pickled by reference (pytorch_lightning...AttributeDict, made up here
                              for the save: loading needs the real one), loops, numpy scalar and array
  whole_module_cuda0.pt       torch.save(model): module objects by class reference (__main__)
  malicious.pt                a pickle whose 'payload' calls os.system when unpickled by Python: it
                              must never run and must be reported (its expect file lists the tensor
                              a payload-free twin of it holds)
  with torch >= 2.3:
  new_dtypes_cuda0.pt         float8_e4m3fn, float8_e5m2, uint16/32/64 (_rebuild_tensor_v3)
  dtypes.safetensors          the dtypes of dtypes_views.pt that safetensors holds, and TinyLM without
  lm.safetensors              its tied head, written by the safetensors library (save_file) with
                              __metadata__ (one key: the library orders several anew each run)

sharded/ (the README's sharded examples):

  pytorch_model-0000N-of-00002.bin + pytorch_model.bin.index.json     torch 1.x: TinyLM (no tied
                              head) in two torch.save shards tagged cuda:0, the index as
                              transformers writes it
  model-0000N-of-00002.safetensors + model.safetensors.index.json     torch 2.x: the same tensors
                              in two safetensors shards (safetensors library)

Deterministic: fixed seeds. Files tagged cuda:N are written on a CPU-only machine as
make_samples.py writes them (sample_common.tagged). The files are small (a few KiB each) so that a
clone carries them; ../shared/corpus, where present, adds files of other torch releases.
"""

import collections
import json
import os
import shutil
import sys
import tempfile
import types

import torch
import torch.nn as nn

from sample_common import HERE, same_tensors, tagged, torch_verify, write_expect

VERSION = ".".join(torch.__version__.split("+")[0].split(".")[:2])
MAJOR = int(VERSION.split(".")[0])
OUT = os.path.join(HERE, "corpus", "torch-" + VERSION)
SHARDED = os.path.join(HERE, "sharded")
HAS_V3 = hasattr(torch, "float8_e4m3fn") and hasattr(torch, "uint16")


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=16, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def lm(seed, layers=2):
    torch.manual_seed(seed)
    return TinyLM(layers=layers)


def trained(seed):
    """TinyLM and its AdamW after 3 steps of next-token loss on random ids."""
    m = lm(seed)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.01)
    for _ in range(3):
        ids = torch.randint(0, 64, (4, 9))
        loss = torch.nn.functional.cross_entropy(m(ids[:, :-1]).reshape(-1, 64), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return m, opt


# ---- corpus/torch-X.Y/ -----------------------------------------------------------------------

def lm_cuda0():
    return lm(21).state_dict(), "cuda:0", "TinyLM state_dict, every storage tagged cuda:0; head.weight ties embed.weight"


def lm_cpu():
    return lm(22).state_dict(), "cpu", "TinyLM state_dict on cpu; head.weight ties embed.weight"


def train_ckpt_cuda():
    m, opt = trained(23)
    obj = {
        "epoch": 3,
        "global_step": 120,
        "best_loss": 14.484375,
        "model": m.state_dict(),
        "optimizer": opt.state_dict(),
        "config": {"vocab": 64, "d_model": 16, "layers": 2, "dropout": None, "tie_embeddings": True,
                   "name": "tiny-lm", "betas": (0.9, 0.999), "schedule": {"warmup": 100, "decay": [0.1, 0.01]}},
        "rng": torch.get_rng_state(),
    }
    return obj, "cuda:0", "training checkpoint: model + AdamW state + config + rng state, all cuda:0"


MIXED = ["cuda:0", "cuda:1", "cpu"]


def mixed_devices():
    torch.manual_seed(24)
    sd = collections.OrderedDict(("layer%d.weight" % i, torch.randn(16, 16)) for i in range(6))
    by_ptr = {t.data_ptr(): MIXED[i % 3] for i, t in enumerate(sd.values())}
    tag = (lambda s: by_ptr[s.data_ptr()])
    devices = {"layer%d.weight" % i: MIXED[i % 3] for i in range(6)}
    return sd, tag, "six tensors round-robin over cuda:0, cuda:1, cpu", {"devices": devices}


def dtype_tensors(complex_too=True):
    """Every common dtype, a 0-d and an empty tensor, special floats; {name: tensor}."""
    g = torch.Generator().manual_seed(25)
    f = torch.randn(7, 5, generator=g)
    ints = torch.arange(-12, 12).reshape(3, 4, 2)
    d = collections.OrderedDict()
    d["t_float32"] = f
    d["t_float64"] = f.double() / 3
    d["t_float16"] = f.half()
    d["t_bfloat16"] = f.bfloat16()
    d["t_int8"] = ints.to(torch.int8)
    d["t_uint8"] = (ints + 12).to(torch.uint8)
    d["t_int16"] = (ints * 1000).to(torch.int16)
    d["t_int32"] = (ints * 100000).to(torch.int32)
    d["t_int64"] = ints * (1 << 40)
    d["t_bool"] = torch.arange(15).reshape(5, 3) % 3 == 0
    if complex_too:
        d["t_complex64"] = torch.complex(torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g))
        d["t_complex128"] = d["t_complex64"].to(torch.complex128) * 2
    d["scalar"] = torch.tensor(2.5)
    d["empty"] = torch.empty(0, 4)
    d["base"] = torch.arange(48, dtype=torch.float32).reshape(6, 8) / 8
    return d


def specials(d):
    d["half_specials"] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 65504.0, 6e-8],
                                      dtype=torch.float16)
    d["f32_specials"] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-45,
                                      torch.finfo(torch.float32).max, torch.finfo(torch.float32).tiny, 0.0])
    return d


def dtypes_views():
    d = dtype_tensors()
    base = d["base"]
    d["row_view"] = base[2]             # offset 16
    d["transposed"] = base.t()          # stride (1, 8)
    d["strided"] = base[:, ::3]         # stride (8, 3)
    return specials(d), "cuda:0", ("every common dtype, 0-d, empty, shared storage views with offsets and strides, "
                                   "special floats")


def dataparallel_cuda1():
    dp = nn.DataParallel(lm(26, layers=1))  # no GPU: DataParallel only wraps, as on a CPU machine
    sd = dp.state_dict()
    sd["module.extra_param"] = nn.Parameter(torch.randn(3, 3))
    return sd, "cuda:1", "DataParallel 'module.' prefixes, saved on cuda:1, holds an nn.Parameter"


def legacy_cuda0():
    return lm(27).state_dict(), "cuda:0", "TinyLM state_dict in the legacy non-zip format"


def lightning_module():
    """A stand-in for pytorch_lightning.utilities.parsing ({name: module}, registered only while
    saving) and its AttributeDict, which pickle then names by reference."""
    names = ["pytorch_lightning", "pytorch_lightning.utilities", "pytorch_lightning.utilities.parsing"]
    modules = {n: types.ModuleType(n) for n in names}
    attr = type("AttributeDict", (dict,), {"__module__": names[-1]})
    modules[names[-1]].AttributeDict = attr
    return modules, attr


def lightning_style_cuda0():
    import numpy
    m, opt = trained(28)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
    modules, attr = lightning_module()
    obj = collections.OrderedDict()
    obj["epoch"] = 7
    obj["global_step"] = 1400
    obj["pytorch-lightning_version"] = "2.4.0"
    obj["state_dict"] = collections.OrderedDict(("model." + k, v) for k, v in m.state_dict().items())
    obj["optimizer_states"] = [opt.state_dict()]
    obj["lr_schedulers"] = [{"last_epoch": 7, "base_lrs": list(sched.base_lrs)}]
    obj["callbacks"] = {"ModelCheckpoint": {"best_model_score": torch.tensor(0.8125),
                                            "best_k_models": {"epoch=6.ckpt": numpy.float64(0.8125)}}}
    obj["hyper_parameters"] = attr(lr=3e-4, layers=2, optimizer="adamw")
    obj["loops"] = {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 8}}}}
    obj["numpy_counts"] = numpy.arange(6, dtype=numpy.int32)
    return obj, "cuda:0", ("Lightning-style .ckpt: state_dict, optimizer_states list, a custom AttributeDict class, "
                           "numpy scalar and array"), {"modules": modules}


def whole_module_cuda0():
    return lm(29, layers=1), "cuda:0", ("torch.save(model) of a TinyLM: module objects by class reference, "
                                        "parameters inside _parameters")


class Payload:
    """Unpickled by Python, this runs a shell command: the file must be refused, never loaded."""

    def __reduce__(self):
        return os.system, ("echo pwned > /tmp/tensorctl_pwned",)


def malicious():
    return ({"weight": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "payload": Payload()}, "cpu",
            "holds a REDUCE of os.system / posix.system: must never run, must be reported")


def new_dtypes_cuda0():
    g = torch.Generator().manual_seed(30)
    f = torch.randn(6, 4, generator=g) * 4
    u = torch.arange(15).reshape(5, 3)
    d = collections.OrderedDict()
    d["t_float8_e4m3fn"] = f.to(torch.float8_e4m3fn)
    d["t_float8_e5m2"] = f.to(torch.float8_e5m2)
    d["t_uint16"] = (u * 4000).to(torch.uint16)
    d["t_uint32"] = (u * 250000000).to(torch.uint32)
    d["t_uint64"] = (u * (1 << 60)).to(torch.uint64)
    d["t_float32"] = f
    return d, "cuda:0", "float8 and unsigned dtypes saved by torch >= 2.3 (_rebuild_tensor_v3)"


TORCH_FILES = [
    ("lm_cuda0.pt", lm_cuda0, {}),
    ("lm_cpu.pt", lm_cpu, {}),
    ("train_ckpt_cuda.pt", train_ckpt_cuda, {}),
    ("mixed_devices.pt", mixed_devices, {}),
    ("dtypes_views.pt", dtypes_views, {}),
    ("dataparallel_cuda1.pt", dataparallel_cuda1, {}),
    ("legacy_cuda0.pt", legacy_cuda0, {"_use_new_zipfile_serialization": False}),
    ("lightning_style_cuda0.ckpt", lightning_style_cuda0, {}),
    ("whole_module_cuda0.pt", whole_module_cuda0, {}),
    ("malicious.pt", malicious, {}),
]
if HAS_V3:
    TORCH_FILES.append(("new_dtypes_cuda0.pt", new_dtypes_cuda0, {}))


def save(obj, path, tag, save_kwargs):
    """torch.save to path, through a file of the same name in a temporary folder beside it (torch
    names the archive's records after the file). The legacy format keys storages by memory address,
    so its bytes differ from run to run: an existing file with the same tensors is kept."""
    tmpdir = tempfile.mkdtemp(dir=os.path.dirname(path))
    tmp = os.path.join(tmpdir, os.path.basename(path))
    try:
        with tagged(tag):
            torch.save(obj, tmp, **save_kwargs)
        if not (save_kwargs and os.path.exists(path) and same_tensors(path, tmp)):
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmpdir)


def write_torch_files():
    for name, make, save_kwargs in TORCH_FILES:
        made = make()
        obj, tag, note = made[:3]
        extra = made[3] if len(made) > 3 else {}
        path = os.path.join(OUT, name)
        sys.modules.update(extra.get("modules", {}))
        try:
            save(obj, path, tag, save_kwargs)
        finally:
            for n in extra.get("modules", {}):
                sys.modules.pop(n, None)
        like = None
        if name == "malicious.pt":  # its expect file: the tensors of a twin without the payload
            like = path + ".twin"
            with tagged(tag):
                torch.save({k: v for k, v in obj.items() if k != "payload"}, like)
        try:
            entries = write_expect(path, note, extra.get("devices", tag), like=like)
        finally:
            if like:
                os.remove(like)
        print("%-34s %7d bytes  %3d tensors" % (os.path.relpath(path, HERE), os.path.getsize(path), len(entries)))


# ---- safetensors ------------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata, note):
    from safetensors.torch import load_file, save_file
    save_file(tensors, path, metadata=metadata)
    loaded = torch_verify.Loaded(load_file(path), {}, ["cpu"])
    entries = torch_verify.expect_entries(path, loaded)
    doc = collections.OrderedDict([("file", os.path.basename(path)), ("note", note),
                                   ("torch", torch.__version__), ("tensors", entries)])
    with open(path + ".expect.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("%-34s %7d bytes  %3d tensors" % (os.path.relpath(path, HERE), os.path.getsize(path), len(entries)))


def untied(seed):
    return collections.OrderedDict((k, v) for k, v in lm(seed).state_dict().items() if k != "head.weight")


def write_safetensors_files():
    write_safetensors(os.path.join(OUT, "dtypes.safetensors"), specials(dtype_tensors(complex_too=False)),
                      {"format": "pt"},
                      "safetensors written by safetensors.torch.save_file")
    write_safetensors(os.path.join(OUT, "lm.safetensors"), untied(31), {"format": "pt"},
                      "TinyLM weights (tied head dropped) as safetensors")


# ---- sharded/ ---------------------------------------------------------------------------------

def shards_of(sd):
    """The two shards of sd (embed and the first block, then the rest), in transformers' names."""
    first = [k for k in sd if k.startswith("embed.") or k.startswith("blocks.0.")]
    return [collections.OrderedDict((k, sd[k]) for k in first),
            collections.OrderedDict((k, v) for k, v in sd.items() if k not in first)]


def write_index(path, shards, files):
    total = sum(t.numel() * t.element_size() for s in shards for t in s.values())
    weight_map = collections.OrderedDict((k, f) for s, f in zip(shards, files) for k in s)
    with open(path, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")


def write_bin_set():
    shards = shards_of(untied(32))
    files = ["pytorch_model-%05d-of-%05d.bin" % (i + 1, len(shards)) for i in range(len(shards))]
    for s, f in zip(shards, files):
        path = os.path.join(SHARDED, f)
        save(s, path, "cuda:0", {})
        write_expect(path, "shard %s of TinyLM (no tied head), tagged cuda:0" % f, "cuda:0")
    write_index(os.path.join(SHARDED, "pytorch_model.bin.index.json"), shards, files)
    print("sharded/pytorch_model.bin.index.json and %d shards" % len(files))


def write_st_set():
    shards = shards_of(untied(32))
    files = ["model-%05d-of-%05d.safetensors" % (i + 1, len(shards)) for i in range(len(shards))]
    for s, f in zip(shards, files):
        write_safetensors(os.path.join(SHARDED, f), s, {"format": "pt"},
                          "shard %s of TinyLM (no tied head), safetensors library" % f)
    write_index(os.path.join(SHARDED, "model.safetensors.index.json"), shards, files)
    print("sharded/model.safetensors.index.json and %d shards" % len(files))


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(SHARDED, exist_ok=True)
    write_torch_files()
    if MAJOR >= 2:
        write_safetensors_files()
        write_st_set()
    else:
        write_bin_set()


if __name__ == "__main__":
    main()
