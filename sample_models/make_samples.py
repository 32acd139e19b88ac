#!/usr/bin/env python3
"""Write the small sample checkpoints in this folder, each with NAME.expect.json.

Run with a Python that has torch (Debian's: /usr/bin/python3 sample_models/make_samples.py).
Deterministic: fixed seeds, so re-running rewrites identical tensors.

Files tagged cuda:N are written on a CPU-only machine by swapping the function torch.save asks
for each storage's location (torch.serialization.location_tag) for one that answers cuda:N.
Nothing else changes, so the bytes are those a save on a GPU machine writes.

The expect files use the schema of the reference corpus: for every tensor its path (keys from
the root down), dtype, shape, stride, storage_offset, requires_grad, parameter, the sha256 of its
logical elements (C order, little-endian) and its saved device. A tensor reachable under two
names is listed under both. They are produced by loading each written file back (with the
non-executing loader of tests/torch_verify.py) and checked against what was saved.
"""

import collections
import os

import torch
import torch.nn as nn

from sample_common import HERE, same_tensors, tagged, torch_verify, write_expect


class TinyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TiedLM(nn.Module):
    def __init__(self, vocab=48, d=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied


class NormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 10)
        self.norm = nn.LayerNorm(10)
        self.bn = nn.BatchNorm1d(10)


def tiny_mlp_cuda0():
    torch.manual_seed(1)
    m = TinyMLP()
    sd = m.state_dict()
    return sd, "cuda:0", "TinyMLP state_dict (fc1 16->32, fc2 32->8), every storage tagged cuda:0"


def tied_views_cpu():
    torch.manual_seed(2)
    m = TiedLM()
    sd = m.state_dict()  # embed.weight and head.weight share one storage
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10) / 7.0
    obj = collections.OrderedDict()
    obj["model"] = sd
    obj["base"] = base
    obj["row2"] = base[2]                      # offset 20
    obj["col_slice"] = base[1:5, 3:8]          # offset 13, stride (10, 1)
    obj["transposed"] = base.t()               # stride (1, 10)
    obj["every_other"] = base[:, ::3]          # stride (10, 3)
    obj["tail_flat"] = base.view(-1)[45:]      # offset 45
    obj["alias_of_base"] = base                # the same tensor under a second name
    ints = torch.arange(24, dtype=torch.int64).reshape(4, 6)
    obj["ints_view"] = ints[1:, 2:]            # a view whose storage is never saved whole elsewhere
    return obj, "cpu", ("tied weights (head.weight is embed.weight) and views of one storage with "
                        "offsets and strides, on cpu")


def optimizer_ckpt_cuda1():
    torch.manual_seed(3)
    m = TinyMLP()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.999))
    for step in range(3):
        x = torch.randn(4, 16)
        loss = m(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    obj = {
        "epoch": 7,
        "global_step": 21,
        "model": m.state_dict(),
        "optimizer": opt.state_dict(),
        "config": {"lr": 1e-3, "betas": (0.9, 0.999), "name": "tiny-mlp", "layers": [16, 32, 8],
                   "amp": False, "scheduler": None},
        "best_loss": torch.tensor(0.125),
    }
    return obj, "cuda:1", "TinyMLP + Adam state (step, exp_avg, exp_avg_sq) + epoch + config, tagged cuda:1"


def legacy_cuda0():
    torch.manual_seed(4)
    m = TinyMLP()
    return m.state_dict(), "cuda:0", "TinyMLP state_dict in the legacy non-zip format, tagged cuda:0"


def fp32_for_cast():
    torch.manual_seed(5)
    m = NormNet()
    m.train()
    with torch.no_grad():
        for _ in range(2):
            m.bn(torch.randn(8, 10))  # num_batches_tracked = 2, running stats move
    sd = m.state_dict()
    f32 = torch.finfo(torch.float32)
    specials = torch.tensor([
        0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), -float("nan"),
        f32.max, -f32.max, f32.tiny, f32.tiny / 4,          # normal min, a subnormal
        65504.0, 65520.0, 70000.0, 6.0e-8, 3.0e-8, 1.0e-9,  # float16 edges: max, overflow, tiny
        3.3895314e38, 3.4e38, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -9,  # bfloat16 edges and rounding
        1.0 + 2 ** -11, 1.0 + 3 * 2 ** -12, 0.1, 1 / 3,
    ], dtype=torch.float32)
    obj = collections.OrderedDict()
    obj["model"] = sd
    obj["specials"] = specials
    obj["specials_view"] = specials[4:12]
    obj["position_ids"] = torch.arange(16, dtype=torch.int64).unsqueeze(0)
    obj["mask"] = torch.tensor([True, False, True])
    obj["f64"] = torch.linspace(-2, 2, 9, dtype=torch.float64)
    obj["f16"] = torch.linspace(-2, 2, 9).to(torch.float16)
    obj["bf16"] = torch.linspace(-2, 2, 9).to(torch.bfloat16)
    return obj, "cpu", ("float32 weights with inf, nan, -0.0, subnormals and float16/bfloat16 "
                        "rounding edges; int64 num_batches_tracked and position_ids; a LayerNorm "
                        "and a BatchNorm; a bool mask; float64/float16/bfloat16 tensors")


def bigger_than_a_chunk():
    g = torch.Generator().manual_seed(6)
    big = torch.randn(768, 1024, generator=g)  # 3 MiB of float32
    return {"big": big, "small": torch.ones(3)}, "cuda:0", \
        "one 3 MiB float32 tensor (768x1024), so rewriting must stream it in chunks; tagged cuda:0"


SAMPLES = [
    ("tiny_mlp_cuda0.pt", tiny_mlp_cuda0, {}),
    ("tied_views_cpu.pt", tied_views_cpu, {}),
    ("optimizer_ckpt_cuda1.pt", optimizer_ckpt_cuda1, {}),
    ("legacy_cuda0.pt", legacy_cuda0, {"_use_new_zipfile_serialization": False}),
    ("fp32_for_cast.pt", fp32_for_cast, {}),
    ("bigger_than_a_chunk.pt", bigger_than_a_chunk, {}),
]


def check_roundtrip(obj, entries):
    """The expect entries must match the object that was saved (paths, values, sharing)."""
    flat = torch_verify.flatten(obj)
    got = {tuple(e["path"]): e for e in entries}
    if set(got) != set(flat):
        raise SystemExit("paths differ: %s" % (set(got) ^ set(flat)))
    import hashlib
    for p, t in flat.items():
        if hashlib.sha256(torch_verify.tensor_bytes(t)).hexdigest() != got[p]["sha256"]:
            raise SystemExit("%s: sha256 differs after save/load" % "/".join(p))


def main():
    out_dir = HERE
    for name, make, save_kwargs in SAMPLES:
        obj, tag, note = make()
        path = os.path.join(out_dir, name)
        tmp = path + ".tmp"
        with tagged(tag):
            torch.save(obj, tmp, **save_kwargs)
        # The legacy format keys storages by memory address, so its bytes differ from run to
        # run: keep an existing file whose tensors are the same.
        if os.path.exists(path) and same_tensors(path, tmp):
            os.remove(tmp)
        else:
            os.replace(tmp, path)
        entries = write_expect(path, note, tag)
        check_roundtrip(obj, entries)
        size = os.path.getsize(path)
        print("%-26s %8d bytes  %3d tensors  %s" % (name, size, len(entries), tag))


if __name__ == "__main__":
    main()
