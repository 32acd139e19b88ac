#!/usr/bin/env python3
"""Write the small distributed checkpoints of sample_models/dcp/, each with NAME.expect.json.

Run with a Python whose torch has torch.distributed.checkpoint (2.x), on the CPU:
    .ci/venv/bin/python sample_models/make_dcp_samples.py [OUTDIR]
Each checkpoint is saved by real torch.distributed.checkpoint.save from a gloo process group of
1, 2 or 4 processes (torch.multiprocessing.spawn on localhost), with fixed seeds.

Then dcp_to_torch_save reads it back, and the expect file records what it gave: for every tensor
its flattened name, dtype, global shape, chunk count and the SHA-256 of its elements (C order,
little-endian, as tests/torch_verify.py hashes them), and every other item with its value (as
JSON, with its Python type) and whether consolidate carries it into a .pt output (loadable with
weights_only=True by torch 1.13 and 2.x: no floats, bytes or sets inside) or lists it as dropped.
The tensors are listed in the schema of the reference corpus as well ("path", "stride", ...), so
that the expect-corpus test checks `tensorctl inspect --json --hash` of every checkpoint.

The samples:
  ws1_plain     1 process: nested dicts of plain tensors (float32, int64, a bfloat16 model, a
                0-d tensor, an empty one, a transposed and a channels_last tensor), an optimizer's
                state (Adam after one step) and a step counter
  ws2_sharded   2 processes: DTensors sharded by rows, by columns (even and uneven), replicated,
                a bfloat16 model and non-tensor items
  ws4_mesh2d    4 processes: a 2x2 device mesh, tensors sharded on both dimensions at once, on one
                of them, replicated; a model nested under "model" and its optimizer under "optim"
"""
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import torch_verify  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_model(dtype=torch.float32):
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 3))
    return m.to(dtype)


def ws1(rank, world):
    model = tiny_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.ones(2, 6)).sum().backward()
    opt.step()
    torch.manual_seed(2)
    conv = torch.randn(4, 3, 2, 2).contiguous(memory_format=torch.channels_last)
    return {
        "model": model.state_dict(),
        "bf16": {k: v for k, v in tiny_model(torch.bfloat16).state_dict().items()},
        "optim": opt.state_dict(),
        "extra": {"scalar": torch.tensor(3.5), "empty": torch.zeros(0, 4), "ids": torch.arange(7, dtype=torch.int64),
                  "transposed": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(), "conv": conv},
        "step": 11,
        "epoch": 2,
        "name": "run-a",
        "tags": ["x", "y"],
    }


def ws2(rank, world):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(3)
    w = torch.randn(10, 6)
    odd = torch.randn(5, 7)
    return {
        "rows": distribute_tensor(w, mesh, [Shard(0)]),
        "cols": distribute_tensor(w, mesh, [Shard(1)]),
        "uneven_rows": distribute_tensor(odd, mesh, [Shard(0)]),
        "uneven_cols": distribute_tensor(odd, mesh, [Shard(1)]),
        "replicated": distribute_tensor(w, mesh, [Replicate()]),
        "vec": distribute_tensor(torch.arange(9, dtype=torch.float32), mesh, [Shard(0)]),
        "bf16": {k: distribute_tensor(v, mesh, [Shard(0)]) for k, v in tiny_model(torch.bfloat16).state_dict().items()},
        "plain": torch.arange(6, dtype=torch.int32).reshape(2, 3),
        "step": 5,
        "lr": 0.25,
        "flags": {"done": False, "n": 3},
    }


def ws4(rank, world):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (2, 2))
    torch.manual_seed(4)
    big = torch.randn(8, 12)
    model = {
        "grid": distribute_tensor(big, mesh, [Shard(0), Shard(1)]),
        "grid_t": distribute_tensor(big, mesh, [Shard(1), Shard(0)]),
        "rows": distribute_tensor(big, mesh, [Shard(0), Replicate()]),
        "cols": distribute_tensor(big, mesh, [Replicate(), Shard(1)]),
        "rep": distribute_tensor(torch.randn(3, 3), mesh, [Replicate(), Replicate()]),
        "cube": distribute_tensor(torch.randn(4, 6, 5), mesh, [Shard(2), Shard(1)]),
        "half": distribute_tensor(torch.randn(6, 4).to(torch.float16), mesh, [Shard(0), Shard(0)]),
    }
    optim = {"state": {"grid": {"exp_avg": distribute_tensor(big * 0.5, mesh, [Shard(0), Shard(1)]),
                                "step": torch.tensor(3.0)}},
             "param_groups": [{"lr": 0.01, "betas": [0.9, 0.99], "params": ["grid"]}]}
    return {"model": model, "optim": optim, "iteration": 1234}


SAMPLES = {"ws1_plain": (1, ws1), "ws2_sharded": (2, ws2), "ws4_mesh2d": (4, ws4)}


def worker(rank, world, name, out, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        sd = SAMPLES[name][1](rank, world)
        dcp.save(sd, checkpoint_id=out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def lookup(ref, md, fqn):
    """The value dcp_to_torch_save put at fqn's path of keys (planner_data) in its nested dicts and lists."""
    v = ref
    for k in (md.planner_data or {}).get(fqn, (fqn,)):
        v = v[k]
    return v


def carried(v):
    """Loads with weights_only=True in torch 1.13 and 2.x: no floats, bytes or sets inside."""
    if v is None or isinstance(v, (bool, int, str)):
        return not isinstance(v, float)
    if isinstance(v, (list, tuple)):
        return all(carried(x) for x in v)
    if isinstance(v, dict):
        return all(carried(k) and carried(x) for k, x in v.items())
    return False


def expect_of(path, ref):
    md = dcp.FileSystemReader(path).read_metadata()
    tensors, items = [], {}
    for fqn, m in md.state_dict_metadata.items():
        v = lookup(ref, md, fqn)
        if isinstance(v, torch.Tensor):
            stride, acc = [], 1
            for s in reversed(list(v.shape)):
                stride.insert(0, acc)
                acc *= max(s, 1)
            tensors.append({"path": [fqn], "dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape),
                            "stride": stride, "storage_offset": 0, "device": "-", "parameter": False,
                            "requires_grad": False, "chunks": len(m.chunks),
                            "sha256": hashlib.sha256(torch_verify.tensor_bytes(v)).hexdigest()})
        else:
            items[fqn] = {"type": type(v).__name__, "value": v, "carried": carried(v)}
    return {"tensors": tensors, "items": items, "world_size": None}


def main():
    out_root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "dcp")
    os.makedirs(out_root, exist_ok=True)
    os.chdir(out_root)  # DCP records the folder as given (StorageMeta.checkpoint_id): a relative name, no machine path
    for name, (world, _) in SAMPLES.items():
        out = name
        shutil.rmtree(out, ignore_errors=True)
        mp.spawn(worker, args=(world, name, out, free_port()), nprocs=world, join=True)
        with tempfile.TemporaryDirectory() as tmp:
            ref_path = os.path.join(tmp, "ref.pt")
            dcp_to_torch_save(out, ref_path)
            ref = torch.load(ref_path, weights_only=False)
        expect = expect_of(out, ref)
        expect["world_size"] = world
        expect["torch"] = torch.__version__
        with open(out + ".expect.json", "w") as f:
            json.dump(expect, f, indent=1, sort_keys=True)
            f.write("\n")
        size = sum(os.path.getsize(os.path.join(out, x)) for x in os.listdir(out))
        print("%s: %d processes, %d tensors, %d other items, %d bytes" % (name, world, len(expect["tensors"]),
                                                                         len(expect["items"]), size))


if __name__ == "__main__":
    main()
