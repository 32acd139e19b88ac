#!/usr/bin/env python3
"""Write a GPT-2-medium-shaped float32 state_dict (~1.4 GB) tagged cuda:0, for bench/bench.sh.

usage: make_bench_ckpt.py OUT [--layers N] [--change-one]   (24 layers, d=1024, vocab 50257, ctx 1024)

--change-one writes the same checkpoint with one element changed: the last element of the tensor
whose record torch writes last (bench/bench_diff.sh diffs the two; a byte comparison such as cmp,
which stops at the first difference, then reads nearly all of both files). Which tensor that is
depends on torch's record order (1.x sorts the record names as strings, 2.x keeps pickling order),
so the file is saved once, its last record looked up, and saved again with that tensor changed.

lm_head.weight is tied to wte.weight (one storage, two names), as in GPT-2. Tensors are filled
from a fixed seed. Storages are tagged cuda:0 by swapping torch.serialization.location_tag
during the save, so the file is what a GPU machine would write.
"""

import argparse
import collections
import time
import zipfile

import torch


def gpt2_state_dict(layers=24, d=1024, vocab=50257, ctx=1024):
    g = torch.Generator().manual_seed(1234)

    def w(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    sd = collections.OrderedDict()
    sd["wte.weight"] = w(vocab, d)
    sd["wpe.weight"] = w(ctx, d)
    for i in range(layers):
        p = "h.%d." % i
        sd[p + "ln_1.weight"] = torch.ones(d)
        sd[p + "ln_1.bias"] = torch.zeros(d)
        sd[p + "attn.c_attn.weight"] = w(d, 3 * d)
        sd[p + "attn.c_attn.bias"] = torch.zeros(3 * d)
        sd[p + "attn.c_proj.weight"] = w(d, d)
        sd[p + "attn.c_proj.bias"] = torch.zeros(d)
        sd[p + "ln_2.weight"] = torch.ones(d)
        sd[p + "ln_2.bias"] = torch.zeros(d)
        sd[p + "mlp.c_fc.weight"] = w(d, 4 * d)
        sd[p + "mlp.c_fc.bias"] = torch.zeros(4 * d)
        sd[p + "mlp.c_proj.weight"] = w(4 * d, d)
        sd[p + "mlp.c_proj.bias"] = torch.zeros(d)
    sd["ln_f.weight"] = torch.ones(d)
    sd["ln_f.bias"] = torch.zeros(d)
    sd["lm_head.weight"] = sd["wte.weight"]  # tied
    return sd


def save_cuda0(sd, path):
    orig = torch.serialization.location_tag
    torch.serialization.location_tag = lambda storage: "cuda:0"
    try:
        torch.save(sd, path)
    finally:
        torch.serialization.location_tag = orig


def last_record_tensor(path, sd):
    """The name of the tensor whose storage record comes last in the zip at path."""
    with zipfile.ZipFile(path) as z:
        keys = [i.filename.rsplit("/data/", 1)[1] for i in z.infolist() if "/data/" in i.filename]
    # storage keys count the storages in pickling order: the state_dict's, tied ones once
    first, seen = [], set()
    for k, v in sd.items():
        if v.data_ptr() not in seen:
            seen.add(v.data_ptr())
            first.append(k)
    return first[int(keys[-1])]


def model_args():
    """OUT and the model's shape (GPT-2 medium by default), as every script here built on this one takes them."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ctx", type=int, default=1024)
    return ap


def main():
    ap = model_args()
    ap.add_argument("--change-one", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    sd = gpt2_state_dict(a.layers, a.d, a.vocab, a.ctx)
    t1 = time.time()
    save_cuda0(sd, a.out)
    if a.change_one:
        name = last_record_tensor(a.out, sd)
        sd[name].view(-1)[-1] += 0.5
        save_cuda0(sd, a.out)
        print("%s: changed the last element of %s (its record is the file's last)" % (a.out, name))
    t2 = time.time()
    n = sum(t.numel() for k, t in sd.items() if k != "lm_head.weight")
    print("%s: %d parameters (%.2f GB float32), generated in %.1fs, saved in %.1fs"
          % (a.out, n, n * 4 / 1e9, t1 - t0, t2 - t1))


if __name__ == "__main__":
    main()
