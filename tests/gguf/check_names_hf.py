#!/usr/bin/env python3
"""--names hf against transformers' own GGUF loader: a llama GGUF converted
with --names hf holds the names transformers' model gets from it
(AutoModelForCausalLM.from_pretrained(..., gguf_file=...)), every tensor
equal to the loaded parameter bit for bit (as float32): attn_q/attn_k
un-permuted as its loader does. diff --names hf then finds the GGUF equal
to that output. Also: --names hf on another architecture is refused.

Usage: check_names_hf.py TENSORCTL OUTDIR GGUF... (the first is also
requantised to Q5_1 and checked). Skips (77) without
transformers, accelerate, gguf and torch."""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    import accelerate  # noqa: F401  (transformers needs it to load GGUF)
    import gguf  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (pip install transformers accelerate gguf torch)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from st_read import read_raw  # noqa: E402

tc, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(out, exist_ok=True)
fails = []
NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def fail(m):
    fails.append(m)
    print("FAIL " + m)


# a quantised llama too, made here: the rows of attn_q/attn_k come back as whole blocks
q = os.path.join(out, "tiny-llama-q5_1.gguf")
subprocess.run([tc, "convert", "-q", "--force", "--dtype", "Q5_1", files[0], q], check=True)
files.append(q)
# (a split set is not checked: transformers' loader reads only the file it is given, and leaves the
# other files' tensors as the model initialised them)
for path in files:
    st = os.path.join(out, os.path.basename(path).replace(".gguf", ".hf.safetensors"))
    p = subprocess.run([tc, "convert", "-q", "--force", "--names", "hf", path, st], capture_output=True, text=True)
    if p.returncode:
        fail(f"{path}: convert --names hf: {p.stderr.strip()}")
        continue
    header, data = read_raw(st)
    mine = {}
    for k, e in header.items():
        if k == "__metadata__":
            continue
        a, b = e["data_offsets"]
        mine[k] = np.frombuffer(data[a:b], NP[e["dtype"]]).reshape(e["shape"]).astype(np.float32)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32)
    theirs = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    if sorted(mine) != sorted(theirs):
        fail(f"{path}: names {sorted(set(mine) ^ set(theirs))} differ from transformers'")
    for k in sorted(set(mine) & set(theirs)):
        if mine[k].shape != theirs[k].shape or mine[k].tobytes() != theirs[k].tobytes():
            fail(f"{path}: {k} differs from transformers' parameter")
    p = subprocess.run([tc, "diff", "-q", "--names", "hf", path, st], capture_output=True, text=True)
    if p.returncode:
        fail(f"{path}: diff --names hf against its own output: exit {p.returncode} {p.stdout} {p.stderr}")
    print(f"{path}: {len(mine)} tensors as transformers loads them")
print(f"{len(files)} files, {len(fails)} failures")
sys.exit(1 if fails else 0)
