#!/usr/bin/env python3
"""A set written by 4 processes at once (--part I/4, then --part index) is byte for byte the set one
process writes: for consolidate (both formats), convert of a sharded set, and to-cpu of one.

    test_parts.py TENSORCTL OUTDIR SAMPLE_DIR

Also: the index step refuses while a shard is missing, and writes no index; --part on a one-file
output and a malformed --part are usage errors. Fails when a set has fewer than 4 shards (the
parts would not all have had work: nothing checked). No torch needed.
"""
import filecmp
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import Report, out_dir, run  # noqa: E402


def listing(d):
    out = []
    for root, _, files in os.walk(d):
        for f in files:
            out.append(os.path.relpath(os.path.join(root, f), d))
    return sorted(out)


def same_tree(a, b):
    la, lb = listing(a), listing(b)
    if la != lb:
        return ["files differ: %s vs %s" % (la, lb)]
    return ["%s differs" % f for f in la if not filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False)]


def in_parts(cmd, out, n=4):
    """cmd + --part i/n for every i at once, then cmd + --part index; problems."""
    procs = [subprocess.Popen(cmd + ["--part", "%d/%d" % (i, n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(1, n + 1)]
    problems = []
    for i, p in enumerate(procs, 1):
        _, err = p.communicate()
        if p.returncode:
            problems.append("part %d/%d exited %d: %s" % (i, n, p.returncode, err.decode().strip()))
    if any(f.endswith(".index.json") for f in listing(out)):
        problems.append("an index exists before --part index ran")
    rc, _, err = run(cmd + ["--part", "index"])
    if rc:
        problems.append("--part index exited %d: %s" % (rc, err.strip()))
    return problems


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    tool, out, sample = sys.argv[1:]
    out_dir(out)
    rep = Report()
    check = rep.check

    q = [tool]
    jobs = [
        ("consolidate to safetensors", lambda o: q + ["consolidate", "-q", sample, "-o", o + "/", "--format",
                                                       "safetensors", "--max-shard-size", "500"]),
        ("consolidate to .bin, cast to float16", lambda o: q + ["consolidate", "-q", sample, "-o",
                                                                 o + "/pytorch_model.bin.index.json",
                                                                 "--max-shard-size", "400", "--dtype", "float16"]),
    ]
    for what, mk in jobs:
        one, many = os.path.join(out, what.replace(" ", "_") + ".one"), os.path.join(out, what.replace(" ", "_") + ".4")
        rc, _, err = run(mk(one))
        problems = ["one process exited %d: %s" % (rc, err.strip())] if rc else []
        if not problems:
            shards = [f for f in listing(one) if not f.endswith(".index.json")]
            if len(shards) < 4:
                problems.append("only %d shards: the parts would not all have work" % len(shards))
            problems += in_parts(mk(many), many) or same_tree(one, many)
        check("%s: 4 parts at once, then --part index, byte for byte one process's set" % what, problems)

    # an index input: convert a set, and rewrite one (to-cpu), in parts
    st_set = os.path.join(out, "consolidate_to_safetensors.one", "model.safetensors.index.json")
    bin_set = os.path.join(out, "consolidate_to_.bin,_cast_to_float16.one", "pytorch_model.bin.index.json")
    for what, mk in (("convert of a set", lambda o: q + ["convert", "-q", st_set, o + "/pytorch_model.bin.index.json",
                                                          "--max-shard-size", "500"]),
                     ("to-cpu of a set", lambda o: q + ["to-cpu", "-q", bin_set, "-o", o + "/"])):
        one, many = os.path.join(out, what.replace(" ", "_") + ".one"), os.path.join(out, what.replace(" ", "_") + ".4")
        rc, _, err = run(mk(one))
        problems = ["one process exited %d: %s" % (rc, err.strip())] if rc else []
        if not problems:
            problems += in_parts(mk(many), many) or same_tree(one, many)
        check("%s: 4 parts at once, then --part index, byte for byte one process's set" % what, problems)

    # the index step while a shard is missing
    d = os.path.join(out, "missing")
    cmd = q + ["consolidate", "-q", sample, "-o", d + "/", "--format", "safetensors", "--max-shard-size", "500"]
    problems = []
    for i in (1, 2, 3):  # part 4 never ran
        rc, _, err = run(cmd + ["--part", "%d/4" % i])
        if rc:
            problems.append("part %d exited %d: %s" % (i, rc, err.strip()))
    rc, _, err = run(cmd + ["--part", "index"])
    if rc != 2 or "missing" not in err or len(err.strip().splitlines()) != 1:
        problems.append("--part index with part 4 missing: exit %d, %r" % (rc, err))
    if any(f.endswith(".index.json") for f in listing(d)):
        problems.append("an index was written although a shard is missing")
    check("--part index refuses while a shard is missing, and writes no index", problems)

    problems = []
    for args, frag in ((["consolidate", sample, "-o", os.path.join(out, "x.pt"), "--part", "1/2"], "sharded output"),
                       (["consolidate", sample, "-o", out + "/y/", "--format", "pt", "--part", "3/2"], "--part"),
                       (["consolidate", sample, "-o", out + "/y/", "--format", "pt", "--part", "0/2"], "--part"),
                       (["consolidate", sample, "-o", out + "/y/", "--format", "pt", "--part", "x"], "--part")):
        rc, _, err = run(q + args)
        if rc != 2 or frag not in err:
            problems.append("%s: exit %d, %r" % (" ".join(args[3:]), rc, err.strip()))
    check("--part misuse is a usage error", problems)

    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
