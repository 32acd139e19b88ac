#!/usr/bin/env python3
"""Make the DeepSpeed ZeRO samples of this folder with real DeepSpeed (run by hand; CI has no DeepSpeed).

    make_zero_samples.py [--refs] [OUTDIR] [CASE...]

Each case is what engine.save_checkpoint() writes after a few Adam steps of a small model (an
embedding tied to the output head, odd-sized Linear and LayerNorm layers so that every partition is
padded, a frozen Linear and a frozen bare parameter, float, int64 and non-persistent buffers, two
parameter groups), trained on the CPU accelerator with gloo by as many processes as the case has
ranks. Beside each case NAME/, NAME.reference.pt is torch.save(get_fp32_state_dict_from_zero_checkpoint
(NAME)): what tensorctl consolidate must give, name for name, bit for bit; NAME.exclude_frozen.
reference.pt the same with exclude_frozen_parameters=True. A case saved at two steps also gets
NAME.TAG.reference.pt for the older tag. --refs makes the references of existing cases anew. DeepSpeed's copied zero_to_fp32.py and
zero_to_torch.py are removed from the folders (they are DeepSpeed's code, not samples).

Needs DeepSpeed (pip install deepspeed; DS_BUILD_OPS=0 is enough) over a torch with gloo. Two
things are changed in DeepSpeed's process, neither touching what it writes: its CPU shared-memory
all-reduce op is not JIT-built (inference only; the build takes minutes), and the CPU accelerator's
fp16 check (mkldnn fp16 support, absent on many CPUs) is passed so fp16 training runs on torch's
generic CPU kernels.
"""
import os
import shutil
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("DS_BUILD_OPS", "0")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

V, D, H, T = 37, 23, 29, 5

# name: (stage, ranks, precision, extra zero_optimization keys, steps at which to save)
CASES = {
    "z1_w1_fp32": (1, 1, "fp32", {}, [3]),
    "z1_w3_fp16": (1, 3, "fp16", {}, [3]),
    "z2_w3_fp32": (2, 3, "fp32", {}, [3]),
    "z2_w2_fp16": (2, 2, "fp16", {}, [3]),
    "z2_w4_bf16": (2, 4, "bf16", {}, [3]),
    "z2_w2_fp32_tags": (2, 2, "fp32", {}, [2, 3]),
    "z3_w3_bf16": (3, 3, "bf16", {}, [3]),
    "z3_w2_fp16": (3, 2, "fp16", {}, [3]),
    "z3_w4_fp32": (3, 4, "fp32", {}, [3]),
    "z3_w1_fp16": (3, 1, "fp16", {}, [3]),
    "z1_w2_bf16_fp32accum": (1, 2, "bf16accum", {}, [3]),
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.frozen_scale = nn.Parameter(torch.linspace(0.5, 1.5, D), requires_grad=False)
        self.register_buffer("pos", torch.randn(T, D))
        self.register_buffer("counts", torch.arange(7, dtype=torch.int64) * 3)
        self.register_buffer("scratch", torch.zeros(3), persistent=False)
        self.fc1 = nn.Linear(D, H)
        self.ln1 = nn.LayerNorm(H)
        self.fc2 = nn.Linear(H, D)
        self.ln2 = nn.LayerNorm(D)
        self.frozen = nn.Linear(D, D)
        self.frozen.requires_grad_(False)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        h = self.emb(x) + self.pos[: x.shape[1]].to(self.emb.weight.dtype)
        h = h + self.frozen(h) * self.frozen_scale
        h = self.ln1(F.gelu(self.fc1(h)))
        h = self.ln2(self.fc2(h))
        return self.head(h)


def config(stage, precision, extra):
    zero = {"stage": stage}
    zero.update(extra)
    c = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 1000,
         "zero_allow_untested_optimizer": True, "zero_optimization": zero}
    if precision == "bf16":
        c["bf16"] = {"enabled": True}
    elif precision == "bf16accum":  # selects DeepSpeed's BF16_Optimizer, which zero_to_fp32 refuses
        c["bf16"] = {"enabled": True}
        c["data_types"] = {"grad_accum_dtype": "fp32"}
    elif precision == "fp16":
        c["fp16"] = {"enabled": True, "initial_scale_power": 8}
    return c


def worker(rank, world, port, name, out, stage, precision, extra, saves):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world))
    import deepspeed
    import deepspeed.comm.torch as dct
    from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator
    dct.build_shm_op = lambda: None
    CPU_Accelerator.is_fp16_supported = lambda self: True
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(1234)
    model = Model()
    decay = [model.emb.weight, model.fc1.weight, model.fc2.weight]
    rest = [model.fc1.bias, model.ln1.weight, model.ln1.bias, model.fc2.bias, model.ln2.weight, model.ln2.bias]
    opt = torch.optim.Adam([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=1e-2)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config(stage, precision, extra))
    g = torch.Generator().manual_seed(99 + rank)
    for step in range(1, max(saves) + 1):
        x = torch.randint(0, V, (2, T), generator=g)
        y = torch.randint(0, V, (2, T), generator=g)
        loss = F.cross_entropy(engine(x).float().reshape(-1, V), y.reshape(-1))
        engine.backward(loss)
        engine.step()
        if step in saves:
            engine.save_checkpoint(os.path.join(out, name))


def reference(path, tag=None, exclude_frozen=False):
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    return get_fp32_state_dict_from_zero_checkpoint(path, tag=tag, exclude_frozen_parameters=exclude_frozen)


def references(folder, saves):
    """DeepSpeed's state_dicts of a case: of its latest step, with exclude_frozen_parameters, of older steps."""
    torch.save(reference(folder), folder + ".reference.pt")
    torch.save(reference(folder, exclude_frozen=True), folder + ".exclude_frozen.reference.pt")
    for s in saves[:-1]:
        tag = "global_step%d" % s
        torch.save(reference(folder, tag), "%s.%s.reference.pt" % (folder, tag))


def make(out, name, port):
    stage, world, precision, extra, saves = CASES[name]
    folder = os.path.join(out, name)
    shutil.rmtree(folder, ignore_errors=True)
    mp.spawn(worker, args=(world, port, name, out, stage, precision, extra, saves), nprocs=world, join=True)
    for f in ("zero_to_fp32.py", "zero_to_torch.py"):
        if os.path.exists(os.path.join(folder, f)):
            os.remove(os.path.join(folder, f))
    if precision != "bf16accum":
        references(folder, saves)


def main():
    args = sys.argv[1:]
    refs_only = "--refs" in args  # the references of cases already made, anew
    args = [a for a in args if a != "--refs"]
    out = args.pop(0) if args and not args[0] in CASES else os.path.dirname(os.path.abspath(__file__))
    names = args or list(CASES)
    for i, name in enumerate(names):
        if name not in CASES:
            sys.exit("unknown case %s (cases: %s)" % (name, ", ".join(CASES)))
        if refs_only:
            if CASES[name][2] != "bf16accum":
                references(os.path.join(out, name), CASES[name][4])
        else:
            make(out, name, 29600 + i)
        print("made", name)


if __name__ == "__main__":
    main()
