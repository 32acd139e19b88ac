"""A safetensors file read as its format says, not through tensorctl: the judges' own reader.

    header, data = read_raw(path)   the JSON header (__metadata__ included) and the bytes after it
    read_tensors(path)              {name: torch tensor} in the header's order, and the views that
                                    __metadata__ "tensorctl.aliases" records, each a view of the
                                    tensor it names
    aliases(header)                 those records: {name: {"of", "shape", "stride", "offset"}}
    stored(header, data, name)      the elements stored under name, a 1-d torch tensor
    ST_DTYPES                       the format's dtype names -> torch's

torch is imported only by the functions that make tensors: read_raw serves the judges without it.
"""

import json
import struct
from collections import OrderedDict

ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
             "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
             "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "C64": "complex64"}


def read_raw(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n].decode("utf-8")), blob[8 + n:]


def aliases(header):
    """ValueError when the record is not JSON."""
    return json.loads((header.get("__metadata__") or {}).get("tensorctl.aliases", "{}"))


def stored(header, data, name):
    import torch
    e = header[name]
    dt = getattr(torch, ST_DTYPES[e["dtype"]])
    a, b = e["data_offsets"]
    raw = bytearray(data[a:b])
    return torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)


def read_tensors(path):
    import torch
    header, data = read_raw(path)
    out = OrderedDict()
    for name, e in header.items():
        if name != "__metadata__":
            out[name] = stored(header, data, name).reshape(e["shape"])
    for name, a in aliases(header).items():
        out[name] = torch.as_strided(out[a["of"]].reshape(-1), a["shape"], a["stride"], a["offset"])
    return out
