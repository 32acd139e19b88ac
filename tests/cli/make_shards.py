#!/usr/bin/env python3
"""make_shards.py DIR: a sharded safetensors set, written byte by byte (no torch):
model-00001-of-00002.safetensors (a.weight [1, 2, 3], a.bias [0.5]),
model-00002-of-00002.safetensors (b.weight [4, -5]) and model.safetensors.index.json."""
import json, struct, sys
d = sys.argv[1]
def shard(fn, tensors):
    hdr, data = {}, b""
    for name, vals in tensors:
        raw = struct.pack("<%df" % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": [len(vals)], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open("%s/%s" % (d, fn), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
shard("model-00001-of-00002.safetensors", [("a.weight", [1.0, 2.0, 3.0]), ("a.bias", [0.5])])
shard("model-00002-of-00002.safetensors", [("b.weight", [4.0, -5.0])])
wm = {"a.weight": "model-00001-of-00002.safetensors", "a.bias": "model-00001-of-00002.safetensors",
      "b.weight": "model-00002-of-00002.safetensors"}
with open(d + "/model.safetensors.index.json", "w") as f:
    json.dump({"metadata": {"total_size": 24}, "weight_map": wm}, f)
