#!/usr/bin/env python3
"""Write tests/cast/data/: inputs per float dtype and real torch's
tensor.to(dtype) output for every pair. Needs torch >= 2.1 (float8):
    python3 tests/cast/gen_vectors.py [OUTDIR]   (a python whose torch is >= 2.1)

Files: in_<src>.bin (raw little-endian elements) and <src>_to_<dst>.bin.
Each input holds special values (NaN payloads of both signs, +-inf, -0.0,
max/min normal, subnormals), exact rounding ties of every narrower type and
their neighbours one source ulp away (which catches double rounding through
float32), overflow thresholds, and seeded random values. Lengths are
multiples of 64 so torch converts every element in its vectorised loop: its
scalar tail differs for NaNs in float16->float32 and float64->bfloat16 (see
kernels/cast_bits.h), and tc_cast matches the vectorised result."""
import os
import sys

import torch

NAMES = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
DT = {n: getattr(torch, n) for n in NAMES}
UINT = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
N_WIDE = 1024  # elements per float64/float32/16-bit input; float8: all 256


def size(name):
    return torch.empty(0, dtype=DT[name]).element_size()


def from_bits(name, bits):
    sz = size(name)
    signed = [b - (1 << (8 * sz)) if sz > 1 and b >= 1 << (8 * sz - 1) else b for b in bits]
    return torch.tensor(signed, dtype=UINT[sz]).view(DT[name])


def raw(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def ties(src, gen):
    """Midpoints between neighbours of every narrower type, +- one src ulp."""
    out = []
    for tgt in NAMES:
        if size(tgt) >= size(src) or tgt == src:
            continue
        sz = size(tgt)
        # random finite positive patterns plus the largest and smallest ones
        pats = torch.randint(0, (1 << (8 * sz - 1)) - 1, (24,), generator=gen).tolist()
        lo = from_bits(tgt, pats).double()
        hi = from_bits(tgt, [p + 1 for p in pats]).double()
        ok = torch.isfinite(lo) & torch.isfinite(hi)
        mid = ((lo + hi) / 2)[ok]
        fmax = torch.finfo(DT[tgt]).max
        top = fmax + (fmax - from_bits(tgt, [raw_max(tgt) - 1]).double().item()) / 2
        mid = torch.cat([mid, torch.tensor([top, torch.finfo(DT[tgt]).tiny / 2], dtype=torch.float64),
                         from_bits(tgt, [0]).double() + from_bits(tgt, [1]).double() / 2])
        m = mid.to(DT[src])
        assert torch.equal(m.double(), mid), (src, tgt)  # the ties are exact in src
        up = torch.nextafter(m, torch.full_like(m, float("inf")))
        dn = torch.nextafter(m, torch.full_like(m, -float("inf")))
        for v in (m, up, dn):
            out += [v, -v]
    return torch.cat(out)


def raw_max(name):
    return {"float64": 0x7FEFFFFFFFFFFFFF, "float32": 0x7F7FFFFF, "float16": 0x7BFF, "bfloat16": 0x7F7F,
            "float8_e4m3fn": 0x7E, "float8_e5m2": 0x7B}[name]


def specials(name):
    sz = size(name)
    if sz == 1:
        return list(range(256))
    ebits = {8: 11, 4: 8, 2: 5 if name == "float16" else 8}[sz]
    mbits = 8 * sz - 1 - ebits
    inf = ((1 << ebits) - 1) << mbits
    sign = 1 << (8 * sz - 1)
    quiet = 1 << (mbits - 1)
    pays = [1, 2, quiet, quiet | 1, quiet - 1, (1 << mbits) - 1, 1 << (mbits - 2), 0x55 % (1 << mbits),
            (1 << (mbits - 1)) | (1 << max(0, mbits - 11)), 1 << max(0, mbits - 10), 1 << max(0, mbits - 11),
            1 << max(0, mbits - 24)]
    b = [inf | p for p in pays] + [inf, 0, 1, 2, (1 << mbits) - 1, 1 << mbits, raw_max(name), raw_max(name) - 1]
    return b + [x | sign for x in b]


def inputs(name, gen):
    sz = size(name)
    if sz == 1:
        return from_bits(name, specials(name))
    parts = [from_bits(name, specials(name))]
    parts.append(ties(name, gen))
    thr = [448, 449, 463.9, 464, 464.1, 479, 480, 500, 57344, 61439.9, 61440, 61441, 65504, 65519.9, 65520,
           65536, 1e6, 3.3895313892515355e38, 3.3961775292304e38, 3.4028235e38, 3.4028235677973366e38, 1e39,
           1.17549435e-38, 1e-40, 1e-45, 7e-46, 1e-46, 2**-24, 2**-25, 2**-9, 2**-10, 2**-16, 2**-17]
    t = torch.tensor(thr, dtype=torch.float64).to(DT[name])
    parts += [t, -t]
    n = sum(p.numel() for p in parts)
    want = max(N_WIDE, (n + 63) // 64 * 64)
    rest = want - n
    # random: half raw bit patterns, half values near the narrow types' ranges
    nb = rest // 2
    if sz == 2:
        rb = torch.randint(0, 1 << 16, (nb,), generator=gen).tolist()
    else:
        rb = [int.from_bytes(torch.randint(0, 256, (sz,), generator=gen, dtype=torch.uint8).numpy().tobytes(),
                             "little") for _ in range(nb)]
    parts.append(from_bits(name, rb))
    e = torch.randint(-30, 20, (rest - nb,), generator=gen).double()
    v = (torch.rand(rest - nb, generator=gen, dtype=torch.float64) + 1) * torch.pow(2.0, e)
    v = torch.where(torch.rand(rest - nb, generator=gen) < 0.5, -v, v)
    parts.append(v.to(DT[name]))
    x = torch.cat(parts)
    assert x.numel() % 64 == 0 and x.numel() <= 4096
    return x


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(20240611)
    for s in NAMES:
        x = inputs(s, gen)
        with open(os.path.join(out, f"in_{s}.bin"), "wb") as f:
            f.write(raw(x))
        for d in NAMES:
            if d != s:
                with open(os.path.join(out, f"{s}_to_{d}.bin"), "wb") as f:
                    f.write(raw(x.to(DT[d])))
    with open(os.path.join(out, "README"), "w") as f:
        f.write(f"Generated by gen_vectors.py with torch {torch.__version__} "
                f"(CPU capability {torch.backends.cpu.get_cpu_capability()}). Do not edit.\n")


if __name__ == "__main__":
    main()
