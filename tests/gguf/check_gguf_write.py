#!/usr/bin/env python3
"""GGUF outputs judged by gguf-py: every --dtype tensorctl writes equals
gguf.quants.quantize() of the tensor as float32, bit for bit; 1-D tensors go
F32, rows that are not whole blocks F16; --keep/--only choose; a GGUF input's
metadata is carried (less alignment and split keys, with --kv applied and
general.file_type set); a type kept is copied byte for byte; GGUF to GGUF
without --dtype gives the input's bytes; split output (--max-shard-size)
reads back as the whole model; a .pt input converts too, and a GGUF to .pt
loads in torch with gguf-py's values (when torch imports).
Every output is read by gguf-py's GGUFReader (the consumer).

Usage: check_gguf_write.py TENSORCTL OUTDIR SAMPLES_GGUF_DIR. Needs gguf-py."""
import json
import os
import struct
import subprocess
import sys
import warnings

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType, GGUFWriter, quants

tc, out, samples = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
warnings.simplefilter("ignore")
fails = []
rng = np.random.default_rng(11)


def fail(msg):
    fails.append(msg)
    print("FAIL " + msg)


def run(*args, ok=True):
    p = subprocess.run([tc, *args], capture_output=True, text=True)
    if ok and p.returncode:
        fail(f"tensorctl {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def write_safetensors(path, tensors):
    """{name: (st dtype, shape, raw bytes)} as a safetensors file."""
    header, blobs, off = {}, [], 0
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def bf16_of(x):
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def raw_of(t):
    return np.asarray(t.data).view(np.uint8).tobytes()


def values_of(t):
    """A GGUFReader tensor's float32 values in torch order."""
    shape = tuple(reversed([int(x) for x in t.shape]))
    if t.tensor_type in (T.F32, T.F16, T.F64):
        return np.asarray(t.data).astype(np.float32).reshape(shape)
    return quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(shape)


# an input with every source dtype, shapes that quantise and ones that do not
src_f32 = {
    "a.f32": rng.standard_normal((4, 64)).astype(np.float32),
    "b.f64": rng.standard_normal((2, 96)),
    "c.f16": (rng.standard_normal((3, 32)) * 0.1).astype(np.float16),
    "d.bf16": rng.standard_normal((5, 128)).astype(np.float32),
    "e.norm": rng.standard_normal(64).astype(np.float32),           # 1-D: F32
    "f.rows48": rng.standard_normal((2, 48)).astype(np.float32),    # rows of 48: F16 for 32-blocks
    "g.3d": rng.standard_normal((2, 3, 32)).astype(np.float32),
    "h.i32": rng.integers(-5, 5, (3, 4)).astype(np.int32),          # not floating: kept
    "i.specials": np.array([0.0, -0.0, np.inf, -np.inf, 1e-30, 65504.0, -3.0e-8, 7.0] * 8, np.float32).reshape(2, 32),
}
st = {}
for k, v in src_f32.items():
    if k == "d.bf16":
        st[k] = ("BF16", v.shape, bf16_of(v).tobytes())
        src_f32[k] = (bf16_of(v).astype(np.uint32) << 16).view(np.float32).reshape(v.shape)
    else:
        st[k] = ({np.float32: "F32", np.float64: "F64", np.float16: "F16", np.int32: "I32"}[v.dtype.type], v.shape,
                 v.tobytes())
src = os.path.join(out, "src.safetensors")
write_safetensors(src, st)
as_f32 = {k: (v.astype(np.float32) if v.dtype != np.int32 else v) for k, v in src_f32.items()}

for q in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
    dst = os.path.join(out, f"st-{q}.gguf")
    run("convert", "--force", "-q", "--dtype", q, "--kv", "general.architecture=llama", "--kv",
        "general.name=str:check", src, dst)
    if not os.path.exists(dst):
        continue
    r = GGUFReader(dst)
    got = {t.name: t for t in r.tensors}
    if list(got) != list(st):
        fail(f"{dst}: tensors {list(got)}")
    block = quants.GGML_QUANT_SIZES[T[q]][0]
    for name, x in as_f32.items():
        t = got.get(name)
        if t is None:
            continue
        if name == "h.i32":
            want_t, want = T.I32, x.tobytes()
        elif x.ndim == 1:
            want_t, want = T.F32, x.tobytes()
        elif x.shape[-1] % block:
            want_t, want = T.F16, quants.quantize(x, T.F16).tobytes()
        else:
            want_t = T[q]
            want = np.ascontiguousarray(quants.quantize(x, T[q])).view(np.uint8).tobytes()
        if t.tensor_type != want_t or raw_of(t) != want:
            fail(f"{dst}: {name}: {t.tensor_type.name} differs from gguf-py's {want_t.name} quantisation")
        if list(reversed([int(d) for d in t.shape])) != list(x.shape):
            fail(f"{dst}: {name}: shape {list(t.shape)}")
    fields = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    want_ft = {"F32": 0, "F16": 1, "BF16": 32, "Q8_0": 7, "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9}[q]
    if fields.get("general.architecture") != "llama" or fields.get("general.name") != "check" or \
            fields.get("general.file_type") != want_ft:
        fail(f"{dst}: metadata {fields}")
    if (q not in ("F32", "F16", "BF16")) != ("general.quantization_version" in fields):
        fail(f"{dst}: general.quantization_version {fields.get('general.quantization_version')}")

# --keep and --only
dst = os.path.join(out, "keep.gguf")
run("convert", "--force", "-q", "--dtype", "Q8_0", "--keep", "a.*", "--only", "a.*", "--only", "d.*", "--only", "e.*",
    src, dst)
r = GGUFReader(dst)
types = {t.name: t.tensor_type.name for t in r.tensors}
want = {"a.f32": "F32", "b.f64": "F64", "c.f16": "F16", "d.bf16": "Q8_0", "e.norm": "Q8_0", "f.rows48": "F32",
        "g.3d": "F32", "h.i32": "I32", "i.specials": "F32"}
if types != want:
    fail(f"{dst}: --keep/--only gave {types}, want {want}")
for t in r.tensors:  # kept tensors are the input's bytes
    if t.name in ("b.f64", "c.f16", "a.f32") and raw_of(t) != st[t.name][2]:
        fail(f"{dst}: kept {t.name} is not the input's bytes")

# GGUF to GGUF: the tiny llama requantised, its metadata carried, --kv applied
llama = os.path.join(samples, "tiny-llama-f16.gguf")
for q in ("Q8_0", "Q4_0", "BF16"):
    dst = os.path.join(out, f"llama-{q}.gguf")
    run("convert", "--force", "-q", "--dtype", q, "--kv", "general.name=requant", "--kv", "t.extra=u64:5", llama, dst)
    a, b = GGUFReader(llama), GGUFReader(dst)
    fa = {k: f for k, f in a.fields.items() if not k.startswith("GGUF.")}
    fb = {k: f for k, f in b.fields.items() if not k.startswith("GGUF.")}
    keys = [k for k in fa if k != "general.alignment"] + ["t.extra"]
    if q != "BF16" and "general.quantization_version" not in fa:
        keys.append("general.quantization_version")
    if list(fb) != keys:
        fail(f"{dst}: keys {list(fb)}, want {keys}")
    for k in fa:
        if k in ("general.name", "general.file_type", "general.alignment"):
            continue
        if fb[k].types != fa[k].types or fb[k].contents() != fa[k].contents():
            fail(f"{dst}: key {k} not carried as it was")
    if fb["general.name"].contents() != "requant" or fb["t.extra"].types != [GGUFValueType.UINT64] or \
            fb["t.extra"].contents() != 5:
        fail(f"{dst}: --kv not applied")
    for ta, tb in zip(a.tensors, b.tensors):
        x = values_of(ta)
        want = x.tobytes() if x.ndim == 1 else np.ascontiguousarray(quants.quantize(x, T[q])).view(np.uint8).tobytes()
        if ta.name != tb.name or raw_of(tb) != want:
            fail(f"{dst}: {tb.name} differs from gguf-py's {q} of the input's values")
dst = os.path.join(out, "llama-copy.gguf")
run("convert", "--force", "-q", llama, dst)
if open(dst, "rb").read() != open(llama, "rb").read():
    fail(f"{dst}: GGUF to GGUF without --dtype is not the input's bytes")

# split output: each file read by gguf-py, together the whole model
base = os.path.join(out, "split.gguf")
for f in os.listdir(out):
    if f.startswith("split-"):
        os.remove(os.path.join(out, f))
run("convert", "--force", "-q", "--max-shard-size", "40KB", llama, base)
parts = sorted(f for f in os.listdir(out) if f.startswith("split-") and f.endswith(".gguf"))
if len(parts) < 2 or os.path.exists(base):
    fail(f"split output: files {parts}")
else:
    names, n = [], len(parts)
    for k, f in enumerate(parts):
        if f != f"split-{k + 1:05d}-of-{n:05d}.gguf":
            fail(f"split output: file {f}")
        r = GGUFReader(os.path.join(out, f))
        fields = {key: fl.contents() for key, fl in r.fields.items() if not key.startswith("GGUF.")}
        if fields.get("split.no") != k or fields.get("split.count") != n or \
                fields.get("split.tensors.count") != len(GGUFReader(llama).tensors):
            fail(f"split output: {f}: split keys {fields}")
        if k and len(fields) != 3:
            fail(f"split output: {f} holds more than the split keys")
        names += [t.name for t in r.tensors]
        if sum(t.n_bytes for t in r.tensors) > 40000 and len(r.tensors) > 1:
            fail(f"split output: {f} holds more than 40KB of tensor data")
    if names != [t.name for t in GGUFReader(llama).tensors]:
        fail(f"split output: tensors {names}")
    # and it reads back whole through its first file
    p = run("inspect", "--json", os.path.join(out, parts[0]))
    if p.returncode == 0 and len(json.loads(p.stdout)["tensors"]) != len(names):
        fail("split output: inspect of its first file does not list the whole model")

# metadata of several MiB (a long vocabulary, a long string with escapes and UTF-8 across every
# piece boundary): inspect --json streams it and it reads as gguf-py reads it; a GGUF to GGUF carries it
big = os.path.join(out, "big-kv.gguf")
w = GGUFWriter(big, "llama")
tokens = [f"tok{i}\"\\\n\u00e9\u4e2d" for i in range(120000)]
long_str = ("a\"b\\c\x01\u00e9\u4e2d\U0001F600" * 150000)[:1000003]
ints = rng.integers(-2**31, 2**31, 300000).astype(np.int32)
w.add_token_list(tokens)
w.add_string("t.long", long_str)
w.add_array("t.ints", [int(x) for x in ints])
w.add_tensor("t", np.arange(32, dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
p = run("inspect", "--json", big)
if p.returncode == 0:
    try:
        kv = {e["key"]: e for e in json.loads(p.stdout)["gguf"]["kv"]}
        if kv["tokenizer.ggml.tokens"]["value"] != tokens or kv["tokenizer.ggml.tokens"]["count"] != len(tokens):
            fail(f"{big}: inspect --json: the token list is not gguf-py's")
        if kv["t.long"]["value"] != long_str:
            fail(f"{big}: inspect --json: the long string is not gguf-py's")
        if kv["t.ints"]["value"] != [int(x) for x in ints]:
            fail(f"{big}: inspect --json: the integer array is not gguf-py's")
    except (ValueError, KeyError) as e:
        fail(f"{big}: inspect --json does not read back: {e!r}")
dst = os.path.join(out, "big-kv-copy.gguf")
run("convert", "--force", "-q", "--dtype", "F16", big, dst)
if os.path.exists(dst):
    fb = GGUFReader(dst).fields
    if fb["tokenizer.ggml.tokens"].contents() != tokens or fb["t.long"].contents() != long_str or \
            fb["t.ints"].contents() != [int(x) for x in ints]:
        fail(f"{dst}: the long metadata is not carried as it was")

# a .pt input, where torch imports
try:
    import torch
    pt = os.path.join(out, "src.pt")
    torch.save({"w": torch.tensor(as_f32["a.f32"]), "v": torch.tensor(as_f32["d.bf16"]).to(torch.bfloat16),
                "n": torch.tensor(as_f32["e.norm"])}, pt)
    dst = os.path.join(out, "pt.gguf")
    run("convert", "--force", "-q", "--dtype", "Q4_0", pt, dst)
    r = {t.name: t for t in GGUFReader(dst).tensors}
    for name, x in (("w", as_f32["a.f32"]), ("v", as_f32["d.bf16"])):
        if raw_of(r[name]) != np.ascontiguousarray(quants.quantize(x, T.Q4_0)).view(np.uint8).tobytes():
            fail(f"{dst}: {name} differs from gguf-py's Q4_0")
    if raw_of(r["n"]) != as_f32["e.norm"].tobytes():
        fail(f"{dst}: the 1-D tensor is not F32")
    # and a GGUF to .pt: torch loads every tensor with the values gguf-py dequantises
    for g in (llama, os.path.join(out, "llama-Q4_0.gguf")):
        dst = os.path.join(out, os.path.basename(g) + ".pt")
        if run("convert", "--force", "-q", g, dst).returncode:
            continue
        sd = torch.load(dst, weights_only=True)
        for t in GGUFReader(g).tensors:
            want = values_of(t)
            got = sd[t.name].float().numpy() if t.name in sd else None
            if got is None or got.shape != want.shape or got.tobytes() != want.tobytes():
                fail(f"{dst}: {t.name} differs from gguf-py's values")
except ImportError:
    print("note: torch is not importable here; .pt input and output are not checked")

print(f"GGUF outputs checked against gguf-py, {len(fails)} failures")
sys.exit(1 if fails else 0)
