#!/usr/bin/env python3
"""The GGUF samples of sample_models/gguf/, written by gguf-py's own GGUFWriter
(pip install gguf numpy), each with its references: X.ref.json (header, every
KV with its type and value, every tensor's ggml type, GGUF dims, torch shape,
offsets and the SHA-256 of its bytes) and X.ref.npz (every tensor's values in
torch order: gguf.quants.dequantize's float32, or the native values of
I8..I64 and F64). bad/ holds broken files made from a valid one, and
bad/EXPECT.json why each must be refused. Seeded: the same bytes every run.

    python3 sample_models/gguf/make_gguf_samples.py [OUTDIR]
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter, quants

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gguf"))
import quant_cases  # noqa: E402  (seeded random blocks of every type)

OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
rng = np.random.default_rng(2024)
# the f16 (and f32) fields of the block types gguf_convert_endian.py swaps in a big-endian file
BE_FIELDS = {T.Q4_0: [0], T.Q8_0: [0], T.Q4_K: [0, 2], T.Q6_K: [208], T.MXFP4: [], T.NVFP4: []}


def quantize(x, qtype):
    with np.errstate(all="ignore"):
        return quants.quantize(np.ascontiguousarray(x, dtype=np.float32), qtype)


class Sample:
    """A GGUF file being written, and what its references must say."""

    def __init__(self, name, big=False, **kw):
        self.name, self.big, self.kw = name, big, kw
        self.path = os.path.join(OUT, name + ".gguf")
        self.w = GGUFWriter(self.path, kw.pop("arch", "llama"), endianess=GGUFEndian.BIG if big else GGUFEndian.LITTLE,
                            **kw)
        self.values, self.le_bytes, self.nested = {}, {}, {}

    def tensor(self, name, qtype, np_shape, data=None):
        """Add a tensor of np_shape (torch order) and type qtype; data: float32 values to quantise, raw
        blocks (uint8) or native values; none: random values (random blocks for types gguf-py cannot quantise)."""
        block, tsize = quants.GGML_QUANT_SIZES[qtype]
        n = int(np.prod(np_shape)) if np_shape else 1
        if qtype in (T.F32, T.F16, T.F64, T.I8, T.I16, T.I32, T.I64):
            npt = {T.F32: np.float32, T.F16: np.float16, T.F64: np.float64, T.I8: np.int8, T.I16: np.int16,
                   T.I32: np.int32, T.I64: np.int64}[qtype]
            if data is None:
                data = rng.standard_normal(n) if qtype in (T.F32, T.F16, T.F64) else rng.integers(-1000, 1000, n)
            arr = np.asarray(data).astype(npt).reshape(np_shape)
            self.values[name] = arr  # F16 values are exact as float16
            self.le_bytes[name] = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
            self.w.add_tensor(name, arr.copy())
            return
        rows = n // np_shape[-1]
        if data is None and qtype in (T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.TQ1_0, T.TQ2_0, T.MXFP4):
            data = rng.standard_normal(n).astype(np.float32) * 0.05
        if data is None:
            raw = quant_cases.blocks(rng, qtype.name, n // block).reshape(rows, -1)
        elif np.asarray(data).dtype == np.uint8:
            raw = np.asarray(data).reshape(rows, -1)
        else:
            raw = quantize(np.asarray(data).reshape(-1, np_shape[-1]), qtype).view(np.uint8).reshape(rows, -1)
        assert raw.shape[1] == np_shape[-1] // block * tsize
        self.le_bytes[name] = raw.tobytes()
        self.values[name] = quants.dequantize(raw, qtype).reshape(np_shape).astype(np.float32)
        if qtype == T.BF16:  # as uint16, which the writer swaps for a big-endian file
            self.w.add_tensor(name, raw.view(np.uint16).reshape(np_shape).copy(), raw_dtype=qtype)
            return
        out = raw.copy()
        if self.big:  # GGUFWriter leaves uint8 data alone: swap the scale fields as gguf_convert_endian.py does
            blocks = out.reshape(-1, tsize)
            for off in BE_FIELDS[qtype]:
                blocks[:, [off, off + 1]] = blocks[:, [off + 1, off]]
        self.w.add_tensor(name, out.reshape(*np_shape[:-1], -1), raw_dtype=qtype)

    def kv_nested(self, key, value, sub):
        self.nested[key] = value
        self.w.add_key_value(key, value, GGUFValueType.ARRAY, sub_type=sub)

    def write(self, note):
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()
        if not os.path.exists(self.path):  # a split set
            return
        reference(self, self.path, note)


def field_value(f):
    main = f.types[0]
    if main == GGUFValueType.ARRAY:
        return f.contents()
    v = f.contents()
    return bool(v) if main == GGUFValueType.BOOL else v


def reference(s, path, note):
    r = GGUFReader(path)
    kv = []
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        e = {"key": name, "type": f.types[0].name}
        if f.types[0] == GGUFValueType.ARRAY:
            e["element_type"] = f.types[1].name if len(f.types) > 1 else GGUFValueType(int(f.parts[3][0])).name
        e["value"] = s.nested.get(name, field_value(f)) if s else field_value(f)
        if name in (s.nested if s else {}):
            e["nested"] = True
        kv.append(e)
    tensors = []
    for t in r.tensors:
        le = s.le_bytes.get(t.name) if s else None
        raw = le if le is not None else bytes(r.data[t.data_offset:t.data_offset + t.n_bytes])
        tensors.append({"name": t.name, "ggml_type": t.tensor_type.name, "ggml_type_id": int(t.tensor_type),
                        "ne": [int(x) for x in t.shape], "shape_torch": [int(x) for x in reversed(t.shape.tolist())],
                        "n_elements": int(t.n_elements), "n_bytes": int(t.n_bytes),
                        "offset": int(t.data_offset - r.data_offset), "file_offset": int(t.data_offset),
                        "sha256": hashlib.sha256(raw).hexdigest()})
    size = os.path.getsize(path)
    ref = {"file": os.path.basename(path), "size": size, "version": int(r.fields["GGUF.version"].parts[0][0]),
           "endianness": "big" if r.endianess == GGUFEndian.BIG else "little", "alignment": int(r.alignment),
           "data_offset": int(r.data_offset), "tensor_count": len(r.tensors), "kv_count": len(kv), "kv": kv,
           "tensors": tensors, "note": note,
           "sha256_of": "the tensor's bytes, little-endian (block scales swapped back in a big-endian file)"}
    base = path[:-5]
    with open(base + ".ref.json", "w") as fp:
        json.dump(ref, fp, indent=1)
    vals = s.values if s else {}
    np.savez_compressed(base + ".ref.npz", **{k: vals[k] for k in (t["name"] for t in tensors) if k in vals})


def llama(s, dim, ff, heads, kv_heads, vocab, ftype):
    w = s.w
    w.add_name(s.name)
    w.add_file_type(ftype)
    w.add_quantization_version(2)
    w.add_context_length(128)
    w.add_embedding_length(dim)
    w.add_block_count(1)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(dim // heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("llama")
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(vocab - 3)]
    w.add_token_list(tokens)
    w.add_token_scores([0.0, 0.0, 0.0] + [-float(i) for i in range(vocab - 3)])
    w.add_token_types([2, 3, 3] + [6] * (vocab - 3))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)


def llama_tensors(s, dim, ff, heads, kv_heads, vocab, qtype):
    kvd = dim // heads * kv_heads
    s.tensor("token_embd.weight", qtype, [vocab, dim])
    s.tensor("blk.0.attn_norm.weight", T.F32, [dim], 1 + rng.standard_normal(dim) * 0.1)
    s.tensor("blk.0.attn_q.weight", qtype, [dim, dim])
    s.tensor("blk.0.attn_k.weight", qtype, [kvd, dim])
    s.tensor("blk.0.attn_v.weight", qtype, [kvd, dim])
    s.tensor("blk.0.attn_output.weight", qtype, [dim, dim])
    s.tensor("blk.0.ffn_norm.weight", T.F32, [dim], 1 + rng.standard_normal(dim) * 0.1)
    s.tensor("blk.0.ffn_gate.weight", qtype, [ff, dim])
    s.tensor("blk.0.ffn_up.weight", qtype, [ff, dim])
    s.tensor("blk.0.ffn_down.weight", qtype, [dim, ff])
    s.tensor("output_norm.weight", T.F32, [dim], 1 + rng.standard_normal(dim) * 0.1)
    s.tensor("output.weight", qtype, [vocab, dim])


def f16_data(shape):
    return (rng.standard_normal(int(np.prod(shape))) * 0.05).astype(np.float16)


def tiny_llama():
    dim, ff, heads, kvh, vocab = 64, 128, 4, 2, 256
    s = Sample("tiny-llama-f16")
    llama(s, dim, ff, heads, kvh, vocab, 1)
    llama_tensors(s, dim, ff, heads, kvh, vocab, T.F16)
    s.write("a llama with real llama and tokenizer metadata: 2-D weights F16, norms F32; llama.cpp loads and runs it")
    s = Sample("tiny-llama-q8_0-split", split_max_tensors=5)
    llama(s, dim, ff, heads, kvh, vocab, 7)
    llama_tensors(s, dim, ff, heads, kvh, vocab, T.Q8_0)
    s.write("")
    for k in (1, 2, 3):
        p = os.path.join(OUT, f"tiny-llama-q8_0-split-{k:05d}-of-00003.gguf")
        reference(s, p, f"split {k} of 3 (GGUFWriter split_max_tensors=5)")


def types(big=False):
    s = Sample("types-be" if big else "types", big=big)
    s.w.add_string("general.name", "one tensor of each type" + (", big-endian" if big else ""))
    kinds = list(BE_FIELDS) + [T.BF16] if big else [
        T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ2_XXS, T.IQ2_XS,
        T.IQ3_XXS, T.IQ1_S, T.IQ4_NL, T.IQ3_S, T.IQ2_S, T.IQ4_XS, T.IQ1_M, T.TQ1_0, T.TQ2_0, T.MXFP4, T.NVFP4, T.BF16]
    for q in kinds:
        block = quants.GGML_QUANT_SIZES[q][0]
        s.tensor(f"t.{q.name.lower()}", q, [3, max(block, 64) * 2])
    for q in (T.F32, T.F16, T.F64, T.I8, T.I16, T.I32, T.I64):
        s.tensor(f"t.{q.name.lower()}", q, [5, 7])
    if not big:
        s.tensor("t.q4_0.1d", T.Q4_0, [96])
        s.tensor("t.q8_0.3d", T.Q8_0, [2, 3, 64])
        s.tensor("t.f32.4d", T.F32, [2, 1, 3, 4])
        s.tensor("t.f32.empty", T.F32, [0, 8], np.zeros(0))
        s.tensor("t.q8_0.special", T.Q8_0, [1, 64],
                 np.array([0.0, -0.0, 1e-30, -65504.0, 3.0e-8, 1.0, -1.0, 0.5] * 8, dtype=np.float32))
    s.write("every type gguf-py dequantises, element types, odd shapes" + (" (big-endian)" if big else ""))


def metadata():
    s = Sample("meta-types")
    w = s.w
    w.add_uint8("t.u8", 255)
    w.add_int8("t.i8", -128)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -32768)
    w.add_uint32("t.u32", 4294967295)
    w.add_int32("t.i32", -2147483648)
    w.add_uint64("t.u64", 18446744073709551615)
    w.add_int64("t.i64", -9223372036854775808)
    w.add_float32("t.f32", 0.1)
    w.add_float64("t.f64", 0.1)
    w.add_float32("t.f32.inf", float("inf"))
    w.add_float64("t.f64.tiny", 5e-324)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo \u2603 \"quoted\" \\ back\nslash\ttab")
    w.add_key_value("t.str.empty", "", GGUFValueType.STRING)
    w.add_array("t.arr.u8", [0, 1, 255])
    w.add_key_value("t.arr.i64", [-1, 2**62], GGUFValueType.ARRAY, sub_type=GGUFValueType.INT64)
    w.add_key_value("t.arr.f64", [0.5, -0.0, 1e300], GGUFValueType.ARRAY, sub_type=GGUFValueType.FLOAT64)
    w.add_key_value("t.arr.bool", [True, False], GGUFValueType.ARRAY, sub_type=GGUFValueType.BOOL)
    w.add_array("t.arr.str", ["a", "", "\u00e9\u20ac\U0001f600", "x\u0000y"])
    s.tensor("t.f32", T.F32, [2, 32])
    s.write("every KV type, extreme values, empty and non-ASCII strings")
    s = Sample("meta-nested")
    s.kv_nested("t.nested", [[1, 2, 3], [4], [5, 6]], GGUFValueType.ARRAY)
    s.tensor("t.f32", T.F32, [4])
    s.write("an array of arrays: gguf-py flattens it, ggml refuses the file (a hazard)")
    s = Sample("vocab-only")
    s.w.add_token_list(["a", "b", "c"])
    s.write("no tensors")
    s = Sample("align-64")
    s.w.add_custom_alignment(64)
    s.tensor("t.q8_0", T.Q8_0, [3, 32])
    s.tensor("t.f16", T.F16, [5])
    s.tensor("t.q4_0", T.Q4_0, [1, 32])
    s.write("general.alignment 64")
    s = Sample("align-1")
    s.w.add_custom_alignment(1)
    s.tensor("t.f16", T.F16, [5])
    s.tensor("t.q8_0", T.Q8_0, [3, 32])
    s.write("general.alignment 1: tensors at odd offsets (llama.cpp aborts on it when it mmaps)")


def patch(src, dst, at, data, note, expect=None):
    b = bytearray(open(os.path.join(OUT, src), "rb").read())
    if at is None:
        b = data(b)
    else:
        b[at:at + len(data)] = data
    open(os.path.join(OUT, dst), "wb").write(bytes(b))
    if expect is not None:
        expect[os.path.basename(dst)] = note


def v2():
    patch("align-64.gguf", "align-64-v2.gguf", 4, struct.pack("<I", 2), None)
    reference(None, os.path.join(OUT, "align-64-v2.gguf"), "align-64.gguf with the version word 2")
    # its values are align-64's
    z = np.load(os.path.join(OUT, "align-64.ref.npz"))
    np.savez_compressed(os.path.join(OUT, "align-64-v2.ref.npz"), **{k: z[k] for k in z.files})


def bad():
    os.makedirs(os.path.join(OUT, "bad"), exist_ok=True)
    base = Sample("bad/base")
    base.w.add_uint32("t.count", 3)
    base.w.add_string("t.name", "base")
    base.tensor("blk.0.attn_q.weight", T.Q8_0, [2, 32])
    base.tensor("t.f32", T.F32, [8])
    base.write("")
    raw = open(base.path, "rb").read()
    os.remove(base.path)
    for ext in (".ref.json", ".ref.npz"):
        os.remove(base.path[:-5] + ext)
    e = {}

    def mk(name, fn, why):
        b = fn(bytearray(raw))
        open(os.path.join(OUT, "bad", name), "wb").write(bytes(b))
        e[name] = why

    def at(b, needle, k=0):
        i = -1
        for _ in range(k + 1):
            i = b.index(needle, i + 1)
        return i

    def put(b, off, fmt, v):
        b[off:off + struct.calcsize(fmt)] = struct.pack(fmt, v)
        return b

    # layout of base: header 24; KV 0 key "t.count" ...; tensor infos after the KVs
    ti = at(raw, b"blk.0.attn_q.weight") - 8  # name length of tensor 0
    t1 = at(raw, b"t.f32", 0) - 8
    name0 = len(b"blk.0.attn_q.weight")
    off0 = ti + 8 + name0 + 4 + 16 + 4    # tensor 0's offset field
    type0 = ti + 8 + name0 + 4 + 16       # its type
    off1 = t1 + 8 + 5 + 4 + 8 + 4         # tensor 1's offset field
    mk("bad-magic.gguf", lambda b: put(b, 0, "<4s", b"GGUX"), "magic is not GGUF")
    mk("truncated-header.gguf", lambda b: b[:20], "file ends inside the header")
    mk("truncated-kv.gguf", lambda b: b[:40], "file ends inside the metadata")
    mk("truncated-data.gguf", lambda b: b[:-40], "the last tensor's data runs past the end of the file")
    mk("version-1.gguf", lambda b: put(b, 4, "<I", 1), "GGUFv1 is no longer read by ggml or gguf-py")
    mk("version-4.gguf", lambda b: put(b, 4, "<I", 4), "a version newer than 3")
    mk("version-0.gguf", lambda b: put(b, 4, "<I", 0), "version 0")
    mk("huge-tensor-count.gguf", lambda b: put(b, 8, "<Q", 1 << 60), "tensor_count far beyond what the file can hold")
    mk("huge-kv-count.gguf", lambda b: put(b, 16, "<Q", 1 << 40), "kv_count far beyond what the file can hold")
    mk("huge-string-length.gguf", lambda b: put(b, 24, "<Q", (1 << 63) + 5), "a string length past ggml's 1 GiB")
    mk("string-past-eof.gguf", lambda b: put(b, 24, "<Q", 1 << 20), "a string length past the end of the file")
    mk("empty-key.gguf", lambda b: put(put(b, 24, "<Q", 0), 32, "<7s", b"\0" * 7),
       "an empty key (ggml refuses it)")
    mk("key-not-utf8.gguf", lambda b: put(b, 32, "<B", 0xff), "a key that is not UTF-8 (gguf-py cannot decode it)")
    mk("key-nul.gguf", lambda b: put(b, 33, "<B", 0), "a key with a NUL byte (ggml and gguf-py read it differently)")
    kv0type = 24 + 8 + len(b"general.architecture")  # the writer puts it first
    mk("kv-type-unknown.gguf", lambda b: put(b, kv0type, "<I", 13), "a KV value type out of range")
    mk("type-unknown.gguf", lambda b: put(b, type0, "<I", 1000), "ggml type id out of range")
    mk("type-removed-4.gguf", lambda b: put(b, type0, "<I", 4), "ggml type 4 (Q4_2) was removed")
    mk("type-newer-42.gguf", lambda b: put(b, type0, "<I", 42), "ggml type 42 is unknown to gguf-py 0.19")
    mk("n-dims-5.gguf", lambda b: put(b, ti + 8 + name0, "<I", 5), "more than 4 dimensions")
    mk("row-not-whole-blocks.gguf", lambda b: put(b, ti + 8 + name0 + 4, "<Q", 33),
       "a row of 33 values is not a whole number of Q8_0 blocks")
    mk("dim-negative.gguf", lambda b: put(b, ti + 8 + name0 + 4 + 8, "<Q", 1 << 63), "a dimension ggml reads as negative")
    mk("elements-overflow.gguf", lambda b: put(put(b, ti + 8 + name0 + 4, "<Q", 1 << 40), ti + 8 + name0 + 12, "<Q", 1 << 40),
       "an element count that overflows")
    mk("offset-misaligned.gguf", lambda b: put(b, off1, "<Q", 72), "an offset not a multiple of the alignment")
    mk("offset-gap.gguf", lambda b: put(b + bytearray(64), off1, "<Q", 128), "an aligned offset with a gap before it (ggml refuses)")
    mk("offset-overlap.gguf", lambda b: put(b, off1, "<Q", 32), "tensors that overlap")
    mk("offset-past-eof.gguf", lambda b: put(b, off1, "<Q", 1 << 40), "tensor data beyond the end of the file")
    mk("name-nul.gguf", lambda b: put(b, ti + 8 + 3, "<B", 0), "a tensor name with a NUL byte")
    # files written whole for the cases a byte patch cannot make
    def whole(name, why, fn):
        w = GGUFWriter(os.path.join(OUT, "bad", name), "llama")
        fn(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        e[name] = why
    whole("duplicate-key.gguf", "a key given twice",
          lambda w: (w.add_uint32("t.a", 1), w.add_uint32("t.b", 2), w.add_tensor("t", np.zeros(4, np.float32))))
    whole("duplicate-tensor-name.gguf", "two tensors share a name",
          lambda w: (w.add_tensor("t.aa", np.zeros(4, np.float32)), w.add_tensor("t.ab", np.ones(4, np.float32))))
    whole("name-too-long.gguf", "a tensor name of 64 bytes (ggml takes 63)",
          lambda w: w.add_tensor("n" * 64, np.zeros(4, np.float32)))
    whole("alignment-wrong-type.gguf", "general.alignment is not UINT32",
          lambda w: (w.add_uint64("general.alignment", 32), w.add_tensor("t", np.zeros(4, np.float32))))
    whole("alignment-zero.gguf", "general.alignment must be a non-zero power of two",
          lambda w: (w.add_uint32("general.alignment", 0xdead), w.add_tensor("t", np.zeros(4, np.float32))))
    whole("alignment-not-pow2.gguf", "general.alignment must be a power of two",
          lambda w: (w.add_uint32("general.alignment", 0xdead), w.add_tensor("t", np.zeros(4, np.float32))))
    whole("huge-array.gguf", "an array count far past the file (and ggml's 2^30)",
          lambda w: (w.add_array("t.arr", [1, 2, 3]), w.add_tensor("t", np.zeros(4, np.float32))))
    whole("string-not-utf8.gguf", "a string value that is not UTF-8",
          lambda w: (w.add_string("t.s", "abc\u00e9"), w.add_tensor("t", np.zeros(4, np.float32))))
    whole("be-q5_0.gguf", "Q5_0 blocks in a big-endian file have no agreed byte order", lambda w: None)

    def fix(name, fn):
        p = os.path.join(OUT, "bad", name)
        b = bytearray(open(p, "rb").read())
        open(p, "wb").write(bytes(fn(b)))

    fix("duplicate-key.gguf", lambda b: b.replace(b"t.b", b"t.a", 1))
    fix("duplicate-tensor-name.gguf", lambda b: b.replace(b"t.ab", b"t.aa", 1))
    fix("alignment-zero.gguf", lambda b: b.replace(struct.pack("<I", 0xdead), struct.pack("<I", 0), 1))
    fix("huge-array.gguf", lambda b: b.replace(struct.pack("<IQ", 5, 3), struct.pack("<IQ", 5, 1 << 33), 1))
    fix("string-not-utf8.gguf", lambda b: b.replace("\u00e9".encode(), b"\xc3\x28", 1))
    w = GGUFWriter(os.path.join(OUT, "bad", "be-q5_0.gguf"), "llama", endianess=GGUFEndian.BIG)
    w.add_tensor("t.q5_0", quantize(rng.standard_normal(64).reshape(2, 32), T.Q5_0), raw_dtype=T.Q5_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(os.path.join(OUT, "bad", "EXPECT.json"), "w") as fp:
        json.dump({k: {"why": v} for k, v in sorted(e.items())}, fp, indent=1)


os.makedirs(OUT, exist_ok=True)
tiny_llama()
types()
types(big=True)
metadata()
v2()
bad()
