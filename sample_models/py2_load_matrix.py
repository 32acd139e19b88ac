#!/usr/bin/env python3
"""Load checkpoints with the torch of this interpreter, every way a user would, and print JSON.

usage: PYTHON py2_load_matrix.py FILE...

For each FILE: torch.load(map_location='cpu') with weights_only=False and weights_only=True (where
this torch has the argument): whether it loads, the exception otherwise, and what it gives (the
object tree with key types, non-tensor values, every tensor's dtype/shape/stride/offset/
requires_grad/Parameter-ness/sha256, and which tensors share a storage). Also the expect entries
(tests/torch_verify.py's non-executing loader, which records each storage's saved location) and
whether plain torch.load gave the same tensors. Used by make_py2_samples.py --expect.
"""
import collections
import hashlib
import json
import os
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import torch_verify  # noqa: E402

warnings.filterwarnings("ignore")


def has_weights_only():
    import inspect
    return "weights_only" in inspect.signature(torch.load).parameters


def describe(obj, depth=0):
    """A JSON tree of what was loaded: containers with their key types, scalars, tensors."""
    if isinstance(obj, torch.Tensor):
        return {"tensor": torch_verify.dtype_name(obj.dtype), "shape": list(obj.shape),
                "parameter": isinstance(obj, torch.nn.Parameter)}
    if isinstance(obj, dict):
        d = {"type": type(obj).__module__ + "." + type(obj).__name__,
             "items": [[type(k).__name__, k if isinstance(k, (str, int, float)) else repr(k),
                        describe(v, depth + 1)] for k, v in obj.items()]}
        md = getattr(obj, "_metadata", None)
        if md is not None:
            d["_metadata"] = describe(md, depth + 1)
        return d
    if isinstance(obj, (list, tuple)):
        return {"type": type(obj).__name__, "items": [describe(v, depth + 1) for v in obj]}
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return {"type": type(obj).__name__, "value": obj}
    return {"type": type(obj).__module__ + "." + type(obj).__name__, "repr": repr(obj)[:80]}


def tensor_facts(obj):
    flat = torch_verify.flatten(obj)
    facts = collections.OrderedDict()
    groups = collections.OrderedDict()
    for p, t in flat.items():
        name = "/".join(p)
        facts[name] = {"dtype": torch_verify.dtype_name(t.dtype), "shape": list(t.shape),
                       "stride": list(t.stride()), "storage_offset": t.storage_offset(),
                       "requires_grad": bool(t.requires_grad),
                       "parameter": isinstance(t, torch.nn.Parameter),
                       "is_leaf": bool(t.is_leaf),
                       "sha256": hashlib.sha256(torch_verify.tensor_bytes(t)).hexdigest()}
        groups.setdefault(torch_verify.storage_ptr(t), []).append(name)
    shared = [g for g in groups.values() if len(g) > 1]
    same_object = []
    seen = {}
    for p, t in flat.items():
        if id(t) in seen:
            same_object.append([seen[id(t)], "/".join(p)])
        else:
            seen[id(t)] = "/".join(p)
    return facts, shared, same_object


def one(path):
    res = {"torch": torch.__version__, "loads": collections.OrderedDict(), "expect": None}
    modes = [("weights_only=False", {"weights_only": False} if has_weights_only() else {})]
    if has_weights_only():
        modes.append(("weights_only=True", {"weights_only": True}))
    for label, kw in modes:
        try:
            obj = torch.load(path, map_location="cpu", **kw)
        except Exception as e:  # noqa: BLE001 - recorded
            text = str(e)
            if "WeightsUnpickler error:" in text:   # the cause, not the advice around it
                text = "Weights only load failed: " + text.split("WeightsUnpickler error:", 1)[1]
                text = text.split("Check the documentation of torch.load", 1)[0]
            words = " ".join(m.strip() for m in text.strip().splitlines() if m.strip())
            res["loads"][label] = {"ok": False, "error": "%s: %s" % (type(e).__name__, words[:300])}
            continue
        facts, shared, same_object = tensor_facts(obj)
        res["loads"][label] = {"ok": True, "tree": describe(obj), "tensors": facts,
                               "shared_storages": shared, "same_tensor_object": same_object}
    try:
        loaded = torch_verify.load_checkpoint(path)
        entries = torch_verify.expect_entries(path, loaded)
        res["expect"] = entries
        plain = res["loads"]["weights_only=False"]
        if plain["ok"]:
            mism = []
            for e in entries:
                f = plain["tensors"].get("/".join(e["path"]))
                if f is None:
                    mism.append("%s missing from plain torch.load" % "/".join(e["path"]))
                    continue
                for k in ("dtype", "shape", "stride", "storage_offset", "requires_grad",
                          "parameter", "sha256"):
                    if f[k] != e[k]:
                        mism.append("%s: %s %r vs %r" % ("/".join(e["path"]), k, f[k], e[k]))
            if len(plain["tensors"]) != len(entries):
                mism.append("plain torch.load has %d tensors, expect %d"
                            % (len(plain["tensors"]), len(entries)))
            res["expect_vs_plain_load"] = mism
    except Exception as e:  # noqa: BLE001
        res["expect_error"] = "%s: %s" % (type(e).__name__, e)
    return res


def main():
    out = collections.OrderedDict()
    for path in sys.argv[1:]:
        out[os.path.basename(path)] = one(path)
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
