#!/usr/bin/env python3
"""Names that cannot collide: checkpoints written here with the torch running this script, whose
keys flatten to one name or are no names at all, through every command that names tensors flat.

    check_names.py TENSORCTL OUTDIR

  - {"a.b": x, "a": {"b": y}, 1: z, "1": w}: convert to .safetensors, extract to .pt, and a
    sharded extract all exit 2 with one line naming both keys and --drop, writing nothing; with
    the colliding names dropped the output loads (torch, and the safetensors library where it is
    installed) and holds exactly the others, bit for bit. A whole rewrite (to-cpu) keeps the graph
    and loads as the input did, both keys included.
  - a collision that key surgery makes (--strip-prefix) names --rename.
  - keys that are no names: bytes (protocol 2's _codecs.encode and protocol 4's BINBYTES), a
    tuple, text with a lone surrogate or a NUL, nested under a dict too: inspect shows each as
    repr() writes it (never "?"), every flat output refuses the first by name (exit 2, --drop),
    and with them dropped writes the others; int, float and big int keys are named as str() does.

One line per check, then a count; exit 1 on any failure, 77 when torch is missing.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch_verify  # noqa: E402
from st_read import read_tensors  # noqa: E402

try:
    from safetensors.torch import load_file as st_load_file
except ImportError:  # the library is optional here: st_read judges alone
    st_load_file = None


def t(v, n=3):
    return torch.arange(n, dtype=torch.float32) + v


def load(path):
    if path.endswith(".safetensors"):
        got = read_tensors(path)
        if st_load_file is not None:
            lib = st_load_file(path)
            if set(lib) - set(got):
                raise ValueError("the safetensors library reads names st_read does not: %s" % sorted(lib))
        return dict(got)
    if path.endswith(".index.json"):
        with open(path) as f:
            ix = json.load(f)
        out = {}
        for shard in sorted(set(ix["weight_map"].values())):
            out.update(load(os.path.join(os.path.dirname(path), shard)))
        return out
    return dict(torch.load(path, map_location="cpu", weights_only=True))


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tc, out = argv[1], out_dir(argv[2], torch)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    rep = Report()

    def refused(what, args, dst, needles):
        rc, _, err = run(tc, *args)
        lines = err.strip().splitlines()
        probs = [] if rc == 2 else ["exit %d, want 2: %s" % (rc, err.strip())]
        if len(lines) != 1:
            probs.append("not one line: %r" % err)
        probs += ["the message lacks %r: %r" % (n, err.strip()) for n in needles if n not in err]
        if os.path.exists(dst):
            probs.append("wrote %s" % dst)
        rep.check(what, probs)

    def written(what, args, dst, want):
        rc, _, err = run(tc, *args)
        probs = [] if rc == 0 else ["exit %d: %s" % (rc, err.strip())]
        if not rc:
            try:
                probs += torch_verify.same_tensors(load(dst), want)
            except Exception as e:  # noqa: BLE001
                probs.append("does not load: %s" % e)
        rep.check(what, probs)

    # ---- keys that flatten to one name
    col = p("collide.pt")
    x = {"a.b": t(1), "a": {"b": t(2), "c": t(3)}, 1: t(4), "1": t(5), "x": t(6)}
    torch.save(x, col)
    both = ["two tensors would be written as 'a.b'", "the key 'a.b' of the top level", "the key 'b' of 'a'",
            "--drop 'a.b'"]
    refused("convert to safetensors: 'a.b' twice is refused", ["convert", "-q", col, p("c.safetensors")],
            p("c.safetensors"), both)
    refused("extract to .pt: 'a.b' twice is refused", ["extract", "-q", col, "-o", p("c.pt")], p("c.pt"), both)
    refused("extract to a set: 'a.b' twice is refused",
            ["extract", "-q", col, "-o", p("cset/model.safetensors.index.json")], p("cset"), both)
    refused("convert: 1 and '1' are refused once 'a.b' is dropped",
            ["convert", "-q", col, p("c.safetensors"), "--drop", "a.b"], p("c.safetensors"),
            ["two tensors would be written as '1'", "the key 1 of the top level", "the key '1' of the top level"])
    rest = {"a.c": t(3), "x": t(6)}
    written("convert: with both names dropped the rest is written",
            ["convert", "-q", col, p("c.safetensors"), "--drop", "a.b", "--drop", "1"], p("c.safetensors"), rest)
    written("extract to .pt: with both names dropped the rest is written",
            ["extract", "-q", col, "-o", p("c.pt"), "--drop", "a.b", "--drop", "1"], p("c.pt"), rest)
    rc, _, err = run(tc, "to-cpu", "-q", col, "-o", p("c.cpu.pt"))
    probs = [] if rc == 0 else ["exit %d: %s" % (rc, err.strip())]
    if not rc:
        got = torch.load(p("c.cpu.pt"), weights_only=True)
        if set(got) != set(x) or not torch.equal(got[1], x[1]) or not torch.equal(got["1"], x["1"]) or \
                not torch.equal(got["a"]["b"], x["a"]["b"]):
            probs.append("the rewrite does not load as the input: keys %s" % sorted(map(str, got)))
    rep.check("to-cpu keeps the graph: every key, 1 and '1' both", probs)
    sur = p("surgery.pt")
    torch.save({"module.w": t(1), "w": t(2)}, sur)
    refused("a collision --strip-prefix makes names --rename",
            ["convert", "-q", sur, p("s.safetensors"), "--strip-prefix=module."], p("s.safetensors"),
            ["two tensors would be written as 'w'", "key surgery made their names alike", "--rename"])

    # ---- keys that are no names
    for proto in (2, 4):
        bad = p("badkeys%d.pt" % proto)
        torch.save({"w": t(1), b"raw": t(2), (1, 2): t(3), "s\udc80": t(4), "n\x00x": t(5), "m": {b"k": t(6)},
                    0.5: t(7), 2 ** 70: t(8), "st": {0: {"exp_avg": t(9)}}}, bad, pickle_protocol=proto)
        rc, so, err = run(tc, "inspect", "--json", bad)
        names = []
        try:
            names = [e["name"] for e in json.loads(so)["tensors"]]
        except ValueError:
            pass
        want = ["w", "b'raw'", "(1, 2)", "'s\\udc80'", "'n\\x00x'", "m.b'k'", "0.5", "1180591620717411303424",
                "st.0.exp_avg"]
        rep.check("protocol %d: inspect names keys as repr() and str() write them" % proto,
                  [] if names == want and "?" not in "".join(names) else ["names %r, want %r (%s)" % (names, want,
                                                                                                    err.strip())])
        drops = ["--drop", "b'raw'", "--drop", "(1, 2)", "--drop", "'s*", "--drop", "'n*", "--drop", "m.*"]
        for cmd, dst in (("convert", p("b%d.safetensors" % proto)), ("extract", p("b%d.pt" % proto))):
            args = [cmd, "-q", bad, dst] if cmd == "convert" else [cmd, "-q", bad, "-o", dst]
            refused("protocol %d: %s refuses the bytes key by name" % (proto, cmd), args, dst,
                    ["tensor \"b'raw'\"", "is bytes", "--drop \"b'raw'\""])
            refused("protocol %d: %s refuses the tuple key" % (proto, cmd), args + drops[:2], dst,
                    ["tensor '(1, 2)'", "is a tuple"])
            refused("protocol %d: %s refuses the lone surrogate" % (proto, cmd), args + drops[:4], dst,
                    ["not UTF-8 (a lone surrogate)"])
            refused("protocol %d: %s refuses the NUL" % (proto, cmd), args + drops[:6], dst, ["holding a NUL"])
            refused("protocol %d: %s refuses the nested bytes key" % (proto, cmd), args + drops[:8], dst,
                    ["tensor \"m.b'k'\"", "is bytes"])
            written("protocol %d: %s writes the other keys, named as str() names them" % (proto, cmd), args + drops,
                    dst, {"w": t(1), "0.5": t(7), "1180591620717411303424": t(8), "st.0.exp_avg": t(9)})
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
