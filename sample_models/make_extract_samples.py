#!/usr/bin/env python3
"""Write the samples extract is tested on, each checkpoint with NAME.expect.json beside it
(TorchScript archives without: torch_verify reads no TorchScript; tests/extract judges them).

Run with a Python that has torch (Debian's: /usr/bin/python3 sample_models/make_extract_samples.py).
Deterministic: fixed seeds, so re-running rewrites identical tensors.

  pickled_module_cuda0.pt   torch.save(model) of a model whose classes live in a throwaway module
                            (tensorctl_throwaway_models), removed once saved: loading the file
                            needs classes that exist nowhere. Nested modules (Sequential,
                            ModuleDict), buffers, a non-persistent buffer, tied weights, a
                            float16 submodule; every storage tagged cuda:0.
  train_ema_cpu.pt          a training checkpoint: model and model_ema state_dicts, Adam state,
                            a GradScaler's state, epoch and config.
  lightning_dp_cpu.ckpt     a Lightning-style checkpoint of a DataParallel-wrapped model: state_dict
                            keys 'model.module.*', optimizer_states, lr_schedulers,
                            hyper_parameters, callbacks, loops.
  torchscript_scripted.pt   torch.jit.script of a nested module (buffers, a non-persistent buffer,
  torchscript_traced.pt     a plain tensor attribute, Sequential) and torch.jit.trace of the same.

The expect files use the schema of the reference corpus (tests/torch_verify.py): every tensor
inspect lists, named as tensorctl names them (a module pickled whole as its state_dict() would).
"""

import collections
import os

import torch
import torch.nn as nn

from sample_common import HERE, tagged, throwaway_module, write_expect

THROWAWAY = "tensorctl_throwaway_models"
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
        self.heads = nn.ModuleDict({"lm": nn.Linear(d, vocab, bias=False), "cls": nn.Linear(d, 3)})
        self.heads["lm"].weight = self.embed.weight  # tied
        self.bn = nn.BatchNorm1d(d)
        self.half = nn.Linear(d, 4).half()
        self.register_buffer("position_ids", torch.arange(6).unsqueeze(0))
        self.register_buffer("mask", torch.ones(6, dtype=torch.bool), persistent=False)
'''


def pickled_module():
    with throwaway_module(MODELS_SRC, THROWAWAY) as m:
        torch.manual_seed(11)
        net = m.Net()
        net.train()
        with torch.no_grad():
            net.bn(torch.randn(4, 8))
        want = net.state_dict()
        with tagged("cuda:0"):
            torch.save(net, os.path.join(HERE, "pickled_module_cuda0.pt"))
    return want, "cuda:0", ("torch.save(model) of classes from a module removed after saving: nested Sequential, "
                            "ModuleList and ModuleDict, buffers, a non-persistent buffer, tied embedding and head, a "
                            "float16 Linear; tagged cuda:0")


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 4)
        self.norm = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.norm(self.enc(x)))


def train_ema():
    torch.manual_seed(12)
    m = Small()
    ema = Small()
    ema.load_state_dict(m.state_dict())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    for _ in range(2):
        m(torch.randn(5, 6)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), m.parameters()):
                pe.mul_(0.9).add_(pm, alpha=0.1)
    obj = collections.OrderedDict()
    obj["epoch"] = 5
    obj["model"] = m.state_dict()
    obj["model_ema"] = ema.state_dict()
    obj["optimizer"] = opt.state_dict()
    obj["scaler"] = {"scale": 65536.0, "growth_factor": 2.0, "_growth_tracker": 3}
    obj["config"] = {"lr": 1e-3, "ema_decay": 0.9}
    return obj, "cpu", "model and model_ema state_dicts, Adam state, GradScaler state, epoch, config"


def lightning_dp():
    torch.manual_seed(13)
    m = Small()
    dp = nn.DataParallel(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    m(torch.randn(5, 6)).sum().backward()
    opt.step()
    sched.step()
    sd = collections.OrderedDict(("model." + k, v) for k, v in dp.state_dict().items())
    obj = collections.OrderedDict()
    obj["epoch"] = 3
    obj["global_step"] = 120
    obj["pytorch-lightning_version"] = "2.4.0"
    obj["state_dict"] = sd
    obj["loops"] = {"fit_loop": {"epoch_progress": {"total": {"ready": 3}}}}
    obj["callbacks"] = {"ModelCheckpoint": {"best_model_score": torch.tensor(0.25), "monitor": "val_loss"}}
    obj["optimizer_states"] = [opt.state_dict()]
    obj["lr_schedulers"] = [sched.state_dict()]
    obj["hyper_parameters"] = {"lr": 0.1, "layers": 2}
    return obj, "cpu", ("Lightning-style checkpoint of a DataParallel model (state_dict keys model.module.*), SGD "
                        "momentum state, StepLR state, callbacks with a tensor, hyper_parameters")


class Scripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, bias=False))
        self.bn = nn.BatchNorm1d(2)
        self.p = nn.Parameter(torch.randn(2))
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("tmp", torch.zeros(2), persistent=False)
        self.plain = torch.arange(3.0)  # an attribute, no buffer: not in state_dict()

    def forward(self, x):
        return self.bn(self.inner(x)) * self.scale + self.p + self.tmp


def torchscript(kind):
    torch.manual_seed(14)
    m = Scripted().eval()
    if kind == "scripted":
        s = torch.jit.script(m)
    else:
        s = torch.jit.trace(m, torch.randn(4, 3))
    path = os.path.join(HERE, "torchscript_%s.pt" % kind)
    s.save(path)
    return path


SAMPLES = [
    ("pickled_module_cuda0.pt", pickled_module),
    ("train_ema_cpu.pt", train_ema),
    ("lightning_dp_cpu.ckpt", lightning_dp),
]


def main():
    for name, make in SAMPLES:
        path = os.path.join(HERE, name)
        obj, tag, note = make()
        if name != "pickled_module_cuda0.pt":
            with tagged(tag):
                torch.save(obj, path)
        entries = write_expect(path, note, tag)
        print("%-26s %8d bytes  %3d tensors  %s" % (name, os.path.getsize(path), len(entries), tag))
    for kind in ("scripted", "traced"):
        p = torchscript(kind)
        print("%-26s %8d bytes  %3d tensors  (TorchScript)" % (os.path.basename(p), os.path.getsize(p),
                                                              len(torch.jit.load(p).state_dict())))


if __name__ == "__main__":
    main()
