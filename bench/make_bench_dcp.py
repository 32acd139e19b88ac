#!/usr/bin/env python3
"""Write a distributed checkpoint of a GPT-like model with real torch.distributed.checkpoint, for
bench/bench_dcp.sh: 4 processes (gloo, CPU), each holding only its own shards (DTensor.from_local),
tensor-parallel style: the embedding, qkv and up projections split by rows (Shard(0)), the output
and down projections by columns (Shard(1)), norms replicated; float32; a step counter and a
learning rate as pickled items. With the defaults, about 1.2 GB of tensor data.

    make_bench_dcp.py OUTDIR [--layers 5] [--hidden 2048] [--vocab 32000] [--world 4]
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp


def worker(rank, a, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    mesh = init_device_mesh("cpu", (a.world,))
    g = torch.Generator().manual_seed(1000 + rank)
    h, w = a.hidden, a.world

    def rows(n, m):
        return DTensor.from_local(torch.randn(n // w, m, generator=g), mesh, [Shard(0)], run_check=False)

    def cols(n, m):
        return DTensor.from_local(torch.randn(n, m // w, generator=g), mesh, [Shard(1)], run_check=False)

    def rep(n):
        return DTensor.from_local(torch.ones(n), mesh, [Replicate()], run_check=False)

    model = {"embed.weight": rows(a.vocab, h)}
    for i in range(a.layers):
        p = "layers.%d." % i
        model[p + "norm.weight"] = rep(h)
        model[p + "attn.qkv.weight"] = rows(3 * h, h)
        model[p + "attn.out.weight"] = cols(h, h)
        model[p + "mlp.up.weight"] = rows(4 * h, h)
        model[p + "mlp.down.weight"] = cols(h, 4 * h)
    dcp.save({"model": model, "step": 1000, "lr": 3e-4}, checkpoint_id=a.out)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--world", type=int, default=4)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a, port), nprocs=a.world, join=True)
    total = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    print("wrote %s: %.2f GB in %d files" % (a.out, total / 1e9, len(os.listdir(a.out))))


if __name__ == "__main__":
    main()
