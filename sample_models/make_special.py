#!/usr/bin/env python3
"""Write special_tensors_cuda0.pt: quantized (per tensor and per channel), sparse COO and
meta tensors beside a dense one, tagged cuda:0 as a GPU save would, with its
expect file (the schema of the reference corpus). Run with real torch:
    python3 sample_models/make_special.py
"""
import hashlib
import json
import os

import torch
import torch.serialization as ser

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "special_tensors_cuda0.pt"


def sha(t):
    if t.is_quantized:
        t = t.int_repr()
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


def entry(name, t, device="cuda:0", data=True):
    e = {"path": [name], "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
         "stride": list(t.stride()), "storage_offset": t.storage_offset(),
         "requires_grad": t.requires_grad, "parameter": isinstance(t, torch.nn.Parameter), "device": device}
    if data:
        e["sha256"] = sha(t)
    return e


def main():
    torch.manual_seed(7)
    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0, -2.0]), 0.1, 3, torch.qint8)
    qc = torch.quantize_per_channel(torch.randn(2, 3), torch.tensor([0.1, 0.2], dtype=torch.float64),
                                    torch.tensor([0, 1]), 0, torch.quint8)
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([3.0, 4.0]), (2, 2))
    meta = torch.empty(4, 5, device="meta")
    obj = {"q": q, "qc": qc, "coo": coo, "meta": meta, "dense": torch.arange(4.0)}
    orig = ser.location_tag
    ser.location_tag = lambda st: orig(st) if st.device.type == "meta" else "cuda:0"
    try:
        torch.save(obj, os.path.join(HERE, NAME))
    finally:
        ser.location_tag = orig
    tensors = [entry("q", q), entry("qc", qc),
               entry("qc.q_per_channel_scales", qc.q_per_channel_scales()),
               entry("qc.q_per_channel_zero_points", qc.q_per_channel_zero_points()),
               entry("coo.indices", coo._indices()), entry("coo.values", coo._values()),
               entry("meta", meta, device="meta", data=False), entry("dense", obj["dense"])]
    for t in tensors:
        t["path"] = t["path"][0].split(".", 1) if t["path"][0].count(".") else t["path"]
    expect = {"file": NAME, "note": "quantized, sparse COO and meta tensors beside a dense one, tagged cuda:0",
              "torch": torch.__version__, "tensors": tensors}
    with open(os.path.join(HERE, NAME + ".expect.json"), "w") as f:
        json.dump(expect, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
