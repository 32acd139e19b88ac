#!/usr/bin/env python3
"""The block codecs against gguf-py itself, on a fresh, larger draw than the
stored vectors: every type gguf-py dequantises (both C paths) and every type
tensorctl quantises, bit for bit. Usage: check_quant_live.py QUANT_TOOL OUTDIR.
Skips (77) when no interpreter here has gguf; gguf_python.sh picks one."""
import os
import subprocess
import sys
import warnings

try:
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from gguf import quants
except ImportError as e:
    print(f"SKIP: gguf-py is not importable ({e}); pip install gguf numpy", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_cases as qc  # noqa: E402

tool, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
warnings.simplefilter("ignore")
rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little") if os.environ.get("QUANT_RANDOM") else 7)
fails = 0


def run(mode, name, data, path):
    src, dst = os.path.join(out, "in.bin"), os.path.join(out, "out.bin")
    data.tofile(src)
    subprocess.run([tool, mode, name, src, dst, path], check=True)
    return np.fromfile(dst, dtype=np.uint8)


for name, elems, nbytes, _ in qc.DECODE:
    b = qc.blocks(rng, name, 4096 if elems >= 256 else 32768)
    want = quants.dequantize(b.reshape(1, -1), T[name]).astype(np.float32).view(np.uint8).reshape(-1)
    for path in ("ref", "cpu"):
        got = run("decode", name, b, path)
        if not np.array_equal(want, got):
            i = int(np.argmax(want != got)) // 4
            print(f"FAIL decode {name} ({path}): value {i}: got {got.view(np.uint32)[i]:#010x} "
                  f"want {want.view(np.uint32)[i]:#010x}")
            fails += 1
for name in qc.ENCODE:
    x = qc.rows(rng, name, 32768)
    want = np.ascontiguousarray(quants.quantize(x.reshape(-1, 32), T[name])).view(np.uint8).reshape(-1)
    for path in ("ref", "cpu"):
        got = run("encode", name, x, path)
        if not np.array_equal(want, got):
            i = int(np.argmax(want != got))
            blk = i // (qc.BLOCK[name] and {"F16": 2, "BF16": 2}.get(name, 0) or 1)
            print(f"FAIL encode {name} ({path}): byte {i}: got {got[i]:#04x} want {want[i]:#04x}")
            fails += 1
print(f"{len(qc.DECODE)} decoders and {len(qc.ENCODE)} encoders checked against gguf-py, {fails} failures")
sys.exit(1 if fails else 0)
