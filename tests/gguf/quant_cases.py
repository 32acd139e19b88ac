"""Inputs for the block codec tests: seeded random blocks of every type
gguf-py dequantises (their f16 scale fields set to plausible values in most
blocks, left as random bits in some, so NaN, inf and subnormal scales occur
too) and float32 rows for the quantisers (normal values, and blocks of
special ones). Shared by gen_quant_vectors.py (the stored vectors) and
check_quant_live.py (a larger draw against gguf-py itself)."""
import numpy as np

# (type, block elements, block bytes, offsets of the f16 fields)
DECODE = [
    ("Q4_0", 32, 18, [0]), ("Q4_1", 32, 20, [0, 2]), ("Q5_0", 32, 22, [0]), ("Q5_1", 32, 24, [0, 2]),
    ("Q8_0", 32, 34, [0]), ("Q2_K", 256, 84, [80, 82]), ("Q3_K", 256, 110, [108]), ("Q4_K", 256, 144, [0, 2]),
    ("Q5_K", 256, 176, [0, 2]), ("Q6_K", 256, 210, [208]), ("IQ2_XXS", 256, 66, [0]), ("IQ2_XS", 256, 74, [0]),
    ("IQ3_XXS", 256, 98, [0]), ("IQ1_S", 256, 50, [0]), ("IQ4_NL", 32, 18, [0]), ("IQ3_S", 256, 110, [0]),
    ("IQ2_S", 256, 82, [0]), ("IQ4_XS", 256, 136, [0]), ("IQ1_M", 256, 56, []), ("TQ1_0", 256, 54, [52]),
    ("TQ2_0", 256, 66, [64]), ("MXFP4", 32, 17, []), ("NVFP4", 64, 36, []),
]
ENCODE = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]
BLOCK = {"F16": 1, "BF16": 1, "Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32}


def blocks(rng, name, nblocks):
    _, elems, nbytes, f16s = next(t for t in DECODE if t[0] == name)
    b = rng.integers(0, 256, size=(nblocks, nbytes), dtype=np.uint8)
    for i in range(nblocks):
        if i % 8 == 7:
            continue  # raw bits: any f16 pattern
        for off in f16s:
            v = np.float16(rng.uniform(-2, 2) * 10.0 ** rng.integers(-4, 1))
            b[i, off:off + 2] = np.frombuffer(v.tobytes(), np.uint8)
        if name == "IQ1_M":  # its f16 is the top nibbles of the four u16 scales at 48
            h = int(np.frombuffer(np.float16(rng.uniform(-1, 1) * 1e-2).tobytes(), np.uint16)[0])
            for w in range(4):
                b[i, 49 + 2 * w] = (b[i, 49 + 2 * w] & 0x0F) | (((h >> (4 * w)) & 0xF) << 4)
    return b


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 65504.0, 65520.0,
                    65519.0, 3.4e38, -3.4e38, 6e-8, 2.9e-8, 3.0e-8, 1.5, 2.5, -2.5, 0.5, 1e-38],
                   dtype=np.float32)


def rows(rng, name, nblocks):
    """nblocks blocks of float32 values for quantiser `name`."""
    n = nblocks * 32
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 2, size=n)).astype(np.float32)
    x = x.reshape(nblocks, 32)
    for i in range(nblocks):
        k = i % 16
        if k == 1:
            x[i] = 0.0  # all zero
        elif k == 2:
            x[i] = -0.0
        elif k == 3:
            x[i, :] = rng.standard_normal(32).astype(np.float32)
            x[i, rng.integers(32)] = np.nan
        elif k == 4:
            x[i, rng.integers(32)] = np.inf
        elif k == 5:
            x[i] = np.float32(1.25)  # all equal
        elif k == 6:
            x[i] = rng.choice(SPECIAL, 32)
        elif k == 7:  # ties between opposite extremes
            x[i] = rng.standard_normal(32).astype(np.float32) * 0.1
            x[i, 3], x[i, 9] = 2.0, -2.0
        elif k == 8:
            x[i] = (rng.integers(-8, 8, 32) * 0.25).astype(np.float32)
        elif k == 9:  # subnormal scales
            x[i] = (rng.standard_normal(32) * 1e-6).astype(np.float32)
    if name in ("Q4_1", "Q5_1"):  # mixed-sign zero extremes are machine-dependent in numpy (quant.h)
        for i in range(nblocks):
            r = x[i]
            for ext in (r.max(), r.min()):
                if ext == 0:
                    r[r == 0] = np.float32(0.0)
    return x.reshape(-1)
