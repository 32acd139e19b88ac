#!/usr/bin/env python3
"""Make the fixtures of tests/unit/data. Deterministic; run from anywhere:
    python3 tests/unit/gen_fixtures.py

obj_pN.pkl   one object graph pickled by CPython's pickler at protocol N (0..5)
obj.canon    its canonical text (the rules match canon() in unit_util.c)
small_pN.pkl, small.canon  the same for a small graph (truncated at every byte)
deflated.zip stored and deflated records (CPython zipfile, seekable output)
descriptor.zip the same records written to a pipe: flag bit 3, data descriptors
deflated_ckpt.pt a torch-style checkpoint whose records are all deflated
             ({'w': 2x3 float32 tensor 1..6})
zip64.zip    CPython zipfile with force_zip64 and every ZIP64 field in use
             (ZIP64_LIMIT lowered while writing; the classic end record then
             patched to 0xFFFF/0xFFFFFFFF so only the ZIP64 records tell the truth)
"""
import collections
import io
import os
import pickle
import struct
import zipfile

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def xorshift(n, seed=0x12345678):
    """Same stream as xorshift_bytes() in unit_util.c."""
    x = seed
    out = bytearray(n)
    for i in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out[i] = x & 0xFF
    return bytes(out)


# ---- canonical text -------------------------------------------------------

class Canon:
    def __init__(self):
        self.labels = {}

    def c(self, o):
        if o is None:
            return "N"
        if o is True:
            return "T"
        if o is False:
            return "F"
        if isinstance(o, int):
            return "i:" + hex(o)
        if isinstance(o, float):
            return "f:" + struct.pack(">d", o).hex()
        if isinstance(o, str):
            return "s:" + o.encode("utf-8", "surrogatepass").hex()
        if isinstance(o, bytes):
            return "b:" + o.hex()
        if isinstance(o, bytearray):
            return "ba:" + bytes(o).hex()
        if isinstance(o, tuple):
            return "(" + ",".join(self.c(x) for x in o) + ")"
        if isinstance(o, frozenset):
            return "fset[" + ",".join(self.c(x) for x in o) + "]"
        if isinstance(o, set):
            return "set[" + ",".join(self.c(x) for x in o) + "]"
        if isinstance(o, (list, dict)):
            if id(o) in self.labels:
                return "#%d#" % self.labels[id(o)]
            n = len(self.labels) + 1
            self.labels[id(o)] = n
            if isinstance(o, collections.OrderedDict):
                body = ",".join(self.c(k) + ":" + self.c(v) for k, v in o.items())
                return "#%d=C0(G:collections.OrderedDict;();;{%s})" % (n, body)
            if isinstance(o, list):
                return "#%d=[" % n + ",".join(self.c(x) for x in o) + "]"
            return "#%d={" % n + ",".join(self.c(k) + ":" + self.c(v) for k, v in o.items()) + "}"
        raise TypeError(type(o))


def make_obj():
    shared = [7, "x"]
    cyc = []
    cyc.append(cyc)
    tup = (shared, "t")
    od = collections.OrderedDict([("a", 1), ("b", shared)])
    return {
        "ints": [0, 1, -1, 127, 128, 255, 256, 65535, 65536, -128, -129, -32768, 2**31 - 1, -2**31,
                 2**31, -2**31 - 1, 2**63 - 1, -2**63, 2**63, 2**64, -2**64 - 1, 2**70, -2**70,
                 2**3000, -2**3000],
        "floats": [0.0, -0.0, 1.5, -2.25e300, float("inf"), float("-inf"), float("nan"), 5e-324],
        "strs": ["", "a", "h\u00e9llo", "\U0001F600", "back\\slash\nnewline\r", "x" * 300],
        "bytes": [b"", b"\x00\xff", bytes(range(256)), b"y" * 300],
        "ba": [bytearray(b""), bytearray(b"ab")],
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "sets": [set(), {1}, frozenset(), frozenset({2})],
        "none": None,
        True: False,
        3: "int key",
        "od": od,
        "shared1": shared,
        "shared2": shared,
        "tup1": tup,
        "tup2": tup,
        "cyc": cyc,
        "big_list": list(range(1200)),
        "big_dict": {i: -i for i in range(1100)},
    }


def make_small():
    """Every opcode family of make_obj() in a few hundred bytes, for
    truncation at every byte."""
    shared = [7]
    cyc = []
    cyc.append(cyc)
    return {"i": [0, -1, 300, 70000, -2**31 - 1, 2**70, -2**70], "f": [1.5, float("nan")],
            "s": ["h\u00e9", "a\\b\n"], "b": [b"", b"\x00\xff"], "ba": bytearray(b"ab"),
            "t": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)], "set": {1}, "fs": frozenset({2}),
            None: True, 3: False, "od": collections.OrderedDict([("a", shared)]), "sh": shared,
            "cyc": cyc}


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


class Pipe(io.RawIOBase):
    """A write-only, unseekable stream, so zipfile writes data descriptors."""

    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


RECORDS = [
    ("arch/text", b"hello, stored world\n", zipfile.ZIP_STORED),
    ("arch/empty", b"", zipfile.ZIP_DEFLATED),
    ("arch/rand", xorshift(80000), zipfile.ZIP_DEFLATED),
    ("arch/zeros", bytes(1 << 20), zipfile.ZIP_DEFLATED),
    ("arch/small", b"abcabcabcabcabcabc" * 10, zipfile.ZIP_DEFLATED),
]


def zinfo(name, method):
    zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    zi.compress_type = method
    return zi


def make_zips():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data, method in RECORDS:
            z.writestr(zinfo(name, method), data)
    write("deflated.zip", b.getvalue())

    p = Pipe()
    with zipfile.ZipFile(p, "w") as z:
        for name, data, method in RECORDS:
            with z.open(zinfo(name, method), "w") as f:
                f.write(data)
    write("descriptor.zip", bytes(p.buf))

    saved = zipfile.ZIP64_LIMIT
    zipfile.ZIP64_LIMIT = 16
    try:
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w") as z:
            for name, data, method in [("z64/a", b"0123456789" * 5, zipfile.ZIP_STORED),
                                       ("z64/b", b"tiny", zipfile.ZIP_STORED),
                                       ("z64/c", xorshift(3000, 7), zipfile.ZIP_DEFLATED)]:
                with z.open(zinfo(name, method), "w", force_zip64=True) as f:
                    f.write(data)
    finally:
        zipfile.ZIP64_LIMIT = saved
    data = bytearray(b.getvalue())
    eocd = data.rfind(b"PK\x05\x06")
    assert data.rfind(b"PK\x06\x06") > 0 and data.rfind(b"PK\x06\x07") > 0
    struct.pack_into("<HHII", data, eocd + 8, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    write("zip64.zip", bytes(data))


def X(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def make_deflated_ckpt():
    pkl = (b"\x80\x02}(" + X("w") + b"ctorch._utils\n_rebuild_tensor_v2\n((" + X("storage") +
           b"ctorch\nFloatStorage\n" + X("0") + X("cpu") + b"K\x06tQK\x00K\x02K\x03\x86K\x03K\x01\x86\x89"
           b"ccollections\nOrderedDict\n)RtRu.")
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data in [("ck/data.pkl", pkl), ("ck/data/0", struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
                           ("ck/version", b"3\n")]:
            z.writestr(zinfo(name, zipfile.ZIP_DEFLATED), data)
    write("deflated_ckpt.pt", b.getvalue())


def main():
    os.makedirs(HERE, exist_ok=True)
    obj = make_obj()
    for p in range(6):
        write("obj_p%d.pkl" % p, pickle.dumps(obj, protocol=p))
    write("obj.canon", Canon().c(obj).encode() + b"\n")
    small = make_small()
    for p in range(6):
        write("small_p%d.pkl" % p, pickle.dumps(small, protocol=p))
    write("small.canon", Canon().c(small).encode() + b"\n")
    make_zips()
    make_deflated_ckpt()


if __name__ == "__main__":
    main()
