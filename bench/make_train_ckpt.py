#!/usr/bin/env python3
"""Write the bench checkpoint (make_bench_ckpt.py's GPT-2-medium-shaped state_dict, ~1.4 GB) wrapped
in a training checkpoint whose optimizer state is as large again, for bench/bench_extract.sh.

usage: make_train_ckpt.py OUT [--layers N] [--vocab V] ...

{'epoch', 'global_step', 'state_dict': the weights (lm_head tied to wte), 'optimizer': an SGD
momentum state (one momentum_buffer per parameter, the weights' size in all), 'lr_scheduler',
'config'}; every storage tagged cuda:0, as a GPU machine writes it.
"""

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bench_ckpt  # noqa: E402


def main():
    a = make_bench_ckpt.model_args().parse_args()
    t0 = time.time()
    sd = make_bench_ckpt.gpt2_state_dict(a.layers, a.d, a.vocab, a.ctx)
    names = [k for k in sd if k != "lm_head.weight"]
    g = torch.Generator().manual_seed(99)
    state = {i: {"momentum_buffer": torch.randn(sd[k].shape, generator=g) * 1e-3} for i, k in enumerate(names)}
    opt = {"state": state, "param_groups": [{"lr": 0.1, "momentum": 0.9, "dampening": 0, "weight_decay": 0,
                                             "nesterov": False, "params": list(range(len(names)))}]}
    ckpt = {"epoch": 3, "global_step": 12000, "state_dict": sd, "optimizer": opt,
            "lr_scheduler": {"last_epoch": 3, "base_lrs": [0.1]}, "config": {"model": "gpt2-medium", "lr": 0.1}}
    t1 = time.time()
    orig = torch.serialization.location_tag
    torch.serialization.location_tag = lambda storage: "cuda:0"
    try:
        torch.save(ckpt, a.out)
    finally:
        torch.serialization.location_tag = orig
    n = sum(sd[k].numel() for k in names)
    print("%s: %d parameters (%.2f GB of weights, as much optimizer state), generated in %.1fs, saved in %.1fs"
          % (a.out, n, n * 4 / 1e9, t1 - t0, time.time() - t1))


if __name__ == "__main__":
    main()
