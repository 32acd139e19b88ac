#!/usr/bin/env python3
"""Seeds for fuzz_zero: a model-states file and rank 0's optimizer-states file of a ZeRO save
folder, as fuzz_zero.c takes them (4-byte little-endian length of the first, then both).

    make_zero_seeds.py OUTDIR

From the one-rank samples of sample_models/zero (real DeepSpeed output) and the hostile folders
of tests/hostile/hostile_zero.py (byte-made)."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
import hostile_zero  # noqa: E402


def seed(model, optim):
    return struct.pack("<I", len(model)) + model + optim


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in ("z1_w1_fp32", "z3_w1_fp16"):
        step = os.path.join(ROOT, "sample_models", "zero", name, "global_step3")
        if not os.path.isdir(step):
            continue
        files = sorted(os.listdir(step))
        model = [f for f in files if f.endswith("_model_states.pt")][0]
        optim = [f for f in files if f.endswith("_optim_states.pt")][0]
        data = seed(open(os.path.join(step, model), "rb").read(), open(os.path.join(step, optim), "rb").read())
        open(os.path.join(out, name + ".zero"), "wb").write(data)
    seen = set()
    for name, (gen, _) in hostile_zero.CASES.items():
        files = gen()
        model = files.get(hostile_zero.TAG + "/mp_rank_00_model_states.pt")
        optim = files.get(hostile_zero.TAG + "/zero_pp_rank_0_mp_rank_00_optim_states.pt")
        if isinstance(model, bytes) and isinstance(optim, bytes) and seed(model, optim) not in seen:
            seen.add(seed(model, optim))
            open(os.path.join(out, name + ".zero"), "wb").write(seed(model, optim))


if __name__ == "__main__":
    main()
