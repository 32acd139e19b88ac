#!/usr/bin/env python3
"""Inputs of bench_gguf.sh: a llama-shaped model of about SIZE bytes in one
format, seeded random values (blocks with plausible f16 scales for the block
types, as gguf-py's own test data), written without holding the model:

    make_bench_gguf.py q8_0|q4_k|bf16-gguf|f32-gguf OUT.gguf [--size 1e9]
    make_bench_gguf.py bf16|f32 OUT.safetensors [--size 1e9]

The GGUF files have llama metadata (no tokenizer), so that llama-quantize
takes them. Needs numpy, and gguf for the GGUF files."""
import argparse
import json
import struct

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("kind", choices=["q8_0", "q4_k", "bf16-gguf", "f32-gguf", "bf16", "f32"])
ap.add_argument("out")
ap.add_argument("--size", type=float, default=1e9)
a = ap.parse_args()
rng = np.random.default_rng(7)
BYTES = {"q8_0": 34 / 32, "q4_k": 144 / 256, "bf16-gguf": 2, "f32-gguf": 4, "bf16": 2, "f32": 4}[a.kind]
dim, ff, heads, kvh, vocab = 2048, 5632, 16, 4, 32000
per_layer = 2 * dim * dim + 2 * dim * (dim // heads * kvh) + 3 * dim * ff
layers = max(1, int((a.size / BYTES - 2 * vocab * dim) // per_layer + 1))
kvd = dim // heads * kvh


def shapes():
    yield "token_embd.weight", (vocab, dim)
    for b in range(layers):
        yield f"blk.{b}.attn_norm.weight", (dim,)
        yield f"blk.{b}.attn_q.weight", (dim, dim)
        yield f"blk.{b}.attn_k.weight", (kvd, dim)
        yield f"blk.{b}.attn_v.weight", (kvd, dim)
        yield f"blk.{b}.attn_output.weight", (dim, dim)
        yield f"blk.{b}.ffn_norm.weight", (dim,)
        yield f"blk.{b}.ffn_gate.weight", (ff, dim)
        yield f"blk.{b}.ffn_up.weight", (ff, dim)
        yield f"blk.{b}.ffn_down.weight", (dim, ff)
    yield "output_norm.weight", (dim,)
    yield "output.weight", (vocab, dim)


def f16_bytes(n, scale):
    return (rng.uniform(0.5, 1.5, n) * scale).astype(np.float16).view(np.uint8).reshape(n, 2)


def data(kind, shape):
    n = int(np.prod(shape))
    if len(shape) == 1:
        return np.ones(n, np.float32).tobytes(), "F32"
    if kind == "q8_0":
        b = rng.integers(0, 256, (n // 32, 34), dtype=np.uint8)
        b[:, 0:2] = f16_bytes(n // 32, 1e-3)
        return b.tobytes(), "Q8_0"
    if kind == "q4_k":
        b = rng.integers(0, 256, (n // 256, 144), dtype=np.uint8)
        b[:, 0:2] = f16_bytes(n // 256, 1e-3)
        b[:, 2:4] = f16_bytes(n // 256, 1e-4)
        return b.tobytes(), "Q4_K"
    x = (rng.standard_normal(n, dtype=np.float32) * 0.02)
    if kind in ("bf16", "bf16-gguf"):
        return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes(), "BF16"
    return x.tobytes(), "F32"


if a.kind in ("bf16", "f32"):  # safetensors: header first, then the data tensor by tensor
    header, off, tensors = {}, 0, list(shapes())
    for name, shape in tensors:
        k = "F32" if len(shape) == 1 or a.kind == "f32" else "BF16"
        nb = int(np.prod(shape)) * (4 if k == "F32" else 2)
        header[name] = {"dtype": k, "shape": list(shape), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape in tensors:
            f.write(data(a.kind, shape)[0])
else:
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFWriter
    w = GGUFWriter(a.out, "llama")
    w.add_name("bench")
    w.add_context_length(4096)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kvh)
    w.add_rope_dimension_count(dim // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    from gguf import GGML_QUANT_SIZES
    infos = []
    for name, shape in shapes():  # infos first, from the shapes alone
        k = "F32" if len(shape) == 1 else {"q8_0": "Q8_0", "q4_k": "Q4_K", "bf16-gguf": "BF16", "f32-gguf": "F32"}[a.kind]
        blk, ts = GGML_QUANT_SIZES[T[k]]
        nbytes = int(np.prod(shape)) // blk * ts
        if k == "F32":
            w.add_tensor_info(name, list(shape), np.dtype(np.float32), nbytes)
        elif k == "BF16":
            w.add_tensor_info(name, list(shape), np.dtype(np.uint16), nbytes, raw_dtype=T.BF16)
        else:  # blocks: the byte shape, as the writer takes uint8 data
            w.add_tensor_info(name, [*shape[:-1], shape[-1] // blk * ts], np.dtype(np.uint8), nbytes, raw_dtype=T[k])
        infos.append((name, shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape in infos:  # one tensor at a time
        raw, _ = data(a.kind, shape)
        w.write_padding(w.fout[0], w.fout[0].tell())
        w.fout[0].write(raw)
    w.write_padding(w.fout[0], w.fout[0].tell())
    w.close()
