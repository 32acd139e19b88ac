#!/usr/bin/env python3
"""Cast random tensors with torch and with cast_tool (tc_cast_cpu) and
compare bits. Usage: live_torch_check.py PATH/TO/cast_tool [N]
Exit 0 on agreement, 1 on a difference (or when no pair was compared), 77
(skip) only without torch. Pairs with a
dtype this torch lacks (float8 before 2.1) are skipped. Every 8- and 16-bit
pattern is tried; lengths are multiples of 64 so torch stays in its
vectorised loop (its scalar tail differs for a few NaNs; see
kernels/cast_bits.h)."""
import subprocess
import sys

try:
    import torch
except Exception as e:  # no torch, or one that fails to import
    print(f"SKIP: torch not importable ({e})")
    sys.exit(77)

NAMES = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
DT = {n: getattr(torch, n) for n in NAMES if hasattr(torch, n)}
UINT = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
# torch 1.x gives float32/float64 -> float16 NaNs as sign|0x7e00 (payload
# dropped); 2.x keeps the top payload bits, as tc_cast does. On 1.x such NaNs
# are compared by sign only.
OLD_F16_NAN = int(torch.__version__.split(".")[0]) < 2


def sample(name, n, gen):
    dt = DT[name]
    sz = torch.empty(0, dtype=dt).element_size()
    if sz <= 2:  # every bit pattern, then random ones
        allp = torch.arange(1 << (8 * sz), dtype=torch.int64)
        x = torch.cat([allp, torch.randint(0, 1 << (8 * sz), (n,), generator=gen)])
        x = x - (x >= (1 << (8 * sz - 1))).long() * (1 << (8 * sz)) if sz == 2 else x
        return x.to(UINT[sz]).view(dt)
    raw = torch.randint(0, 256, (n * sz,), generator=gen, dtype=torch.uint8).view(dt)
    e = torch.randint(-40, 40, (n,), generator=gen).double()
    v = (torch.rand(n, generator=gen, dtype=torch.float64) + 1) * torch.pow(2.0, e)
    v = torch.where(torch.rand(n, generator=gen) < 0.5, -v, v).to(dt)
    return torch.cat([raw, v])


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 16
    gen = torch.Generator().manual_seed(7)
    bad = pairs = 0
    for s in NAMES:
        if s not in DT:
            print(f"skip {s}: not in torch {torch.__version__}")
            continue
        x = sample(s, n, gen)
        x = x[: x.numel() // 64 * 64].contiguous()
        src = x.view(torch.uint8).numpy().tobytes()
        for d in NAMES:
            if d not in DT or d == s:
                continue
            pairs += 1
            want = x.to(DT[d]).view(torch.uint8).numpy().tobytes()
            got = subprocess.run([tool, s, d], input=src, capture_output=True, check=True).stdout
            if OLD_F16_NAN and d == "float16" and got != want:
                g = torch.frombuffer(bytearray(got), dtype=torch.int16)
                w = torch.frombuffer(bytearray(want), dtype=torch.int16)
                nan = torch.isnan(x) & (w & 0x7FFF == 0x7E00)
                if torch.equal(g[~nan], w[~nan]) and torch.equal(g[nan] & 0xFE00, w[nan] & 0xFE00):
                    print(f"ok {s}->{d} (NaN payloads are torch 1.x canonical ones; tc_cast follows 2.x)")
                    continue
            if got != want:
                bad += 1
                dsz = torch.empty(0, dtype=DT[d]).element_size()
                ssz = torch.empty(0, dtype=DT[s]).element_size()
                i = next(k for k in range(len(want) // dsz) if got[k * dsz:(k + 1) * dsz] != want[k * dsz:(k + 1) * dsz])
                le = lambda b: hex(int.from_bytes(b, "little"))
                print(f"FAIL {s}->{d}: element {i}: in {le(src[i * ssz:(i + 1) * ssz])} "
                      f"torch {le(want[i * dsz:(i + 1) * dsz])} cast_tool {le(got[i * dsz:(i + 1) * dsz])}")
            else:
                print(f"ok {s}->{d} ({x.numel()} elements)")
    if pairs == 0:
        print(f"FAIL: torch {torch.__version__}: no dtype pair was compared")
        return 1
    print(f"torch {torch.__version__}: {'FAIL' if bad else 'PASS'} ({pairs} pairs)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
