#!/usr/bin/env python3
"""Write the stored block codec vectors of tests/gguf/data: for every type,
inputs and gguf-py 0.19's output (gguf.quants.dequantize / quantize).
test_quant.c checks the C codecs against them without gguf-py. Run with an
interpreter that has gguf: python3 tests/gguf/gen_quant_vectors.py tests/gguf/data"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_cases as qc  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20240601)
for name, elems, nbytes, _ in qc.DECODE:
    n = 8 if elems >= 256 else 32
    b = qc.blocks(rng, name, n)
    y = quants.dequantize(b.reshape(1, -1), T[name]).astype(np.float32)
    b.tofile(os.path.join(out, f"dec_{name}.in"))
    y.tofile(os.path.join(out, f"dec_{name}.out"))
for name in qc.ENCODE:
    x = qc.rows(rng, name, 32)
    with np.errstate(all="ignore"):
        y = quants.quantize(x.reshape(-1, 32), T[name])
    x.tofile(os.path.join(out, f"enc_{name}.in"))
    np.ascontiguousarray(y).view(np.uint8).tofile(os.path.join(out, f"enc_{name}.out"))
