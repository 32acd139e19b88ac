#!/usr/bin/env python3
"""Judge `tensorctl consolidate` on the distributed checkpoints of sample_models/dcp with real torch.

    check_dcp.py TENSORCTL OUTDIR SAMPLE_DIR...

For every SAMPLE_DIR (a torch.distributed.checkpoint folder with SAMPLE_DIR.expect.json beside it):
  * consolidate to .pt: the file loads with torch.load(weights_only=True) under this torch (1.13 or
    2.x) and holds exactly the expected tensors (dtype, shape, SHA-256 of the elements recorded
    from dcp_to_torch_save's output) and the items the expect file says are carried, with their
    values; none of the others;
  * consolidate to .safetensors: the same tensors, read from the file's own header (no library);
  * --from KEY (the first component of the first nested name): only the names under KEY, relative;
  * --dtype bfloat16: every floating-point tensor is the .pt tensor's .to(torch.bfloat16), bit for bit;
  * a sharded set in each format (--max-shard-size 300): its shards together hold the same tensors,
    and its index lists each once;
  * where this torch has dcp_to_torch_save (2.x): its output for the same folder, tensor for
    tensor, bit for bit, and item for item for the carried items.
One line per check, then `N passed, M failed`. A sample with no tensor, or a run that checked
nothing, fails. Exit 0, 1 on any failure, 2 on bad usage, 77 when torch cannot be imported.
"""
import glob
import json
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, compare_names, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch_verify  # noqa: E402
from torch_verify import FLOATS, st_facts, tensor_dtype as dname, tensor_sha256 as sha  # noqa: E402
from torch_verify import facts as from_pt  # noqa: E402

warnings.filterwarnings("ignore")


def jsonable(v):
    return json.loads(json.dumps(v))


def compare_tensors(got, want):
    """got: name -> (dtype, shape, sha); want: the expect file's tensors, by name."""
    problems, both = compare_names(got, want)
    for name in both:
        w, g = want[name], got[name]
        if (w["dtype"], w["shape"], w["sha256"]) != (g[0], list(g[1]), g[2]):
            problems.append("%s: %s %s %s, expected %s %s %s" % (name, g[0], list(g[1]), g[2][:12], w["dtype"],
                                                                w["shape"], w["sha256"][:12]))
    return problems


def check_sample(tool, out, sample, expect, rep):
    name = os.path.basename(sample)
    want = {t["path"][0]: t for t in expect["tensors"]}
    items = expect["items"]
    if not want:
        rep.check("%s: expect file" % name, ["lists no tensor: it would check nothing"])
        return
    # .pt, loaded with weights_only=True
    pt = os.path.join(out, name + ".pt")
    rc, _, err = run(tool, "consolidate", "-q", sample, "-o", pt)
    problems = ["consolidate exited %d: %s" % (rc, err.strip())] if rc else []
    sd = None
    if not rc:
        try:
            sd = torch.load(pt, weights_only=True)
        except Exception as e:  # noqa: BLE001
            problems.append("torch.load(weights_only=True) failed: %s" % e)
    if sd is not None:
        problems += compare_tensors(from_pt(sd), want)
        for k, it in items.items():
            if it["carried"] and k not in sd:
                problems.append("item %s (%s) not carried" % (k, it["type"]))
            elif it["carried"] and jsonable(sd[k]) != it["value"]:
                problems.append("item %s is %r, expected %r" % (k, sd[k], it["value"]))
            elif not it["carried"] and k in sd:
                problems.append("item %s (%s) carried, but torch 1.13's weights_only loader cannot read it" %
                                (k, it["type"]))
        extra = [k for k in sd if k not in want and k not in items]
        if extra:
            problems.append("names neither a tensor nor an item: %s" % extra)
    rep.check("%s: .pt loads with weights_only=True, tensors and items as dcp_to_torch_save" % name, problems)
    # .safetensors
    stf = os.path.join(out, name + ".safetensors")
    rc, _, err = run(tool, "consolidate", "-q", sample, "-o", stf)
    rep.check("%s: .safetensors holds the same tensors" % name,
              ["consolidate exited %d: %s" % (rc, err.strip())] if rc else compare_tensors(st_facts(stf), want))
    # --from KEY
    tops = [k.split(".", 1)[0] for k in want if "." in k]
    if tops:
        key = tops[0]
        sub = {k[len(key) + 1:]: v for k, v in want.items() if k.startswith(key + ".")}
        fp = os.path.join(out, name + ".from.pt")
        rc, _, err = run(tool, "consolidate", "-q", sample, "-o", fp, "--from", key)
        problems = ["consolidate --from %s exited %d: %s" % (key, rc, err.strip())] if rc else []
        if not rc:
            got = torch.load(fp, weights_only=True)
            problems += compare_tensors(from_pt(got), sub)
            carried = {k[len(key) + 1:] for k, it in items.items() if it["carried"] and k.startswith(key + ".")}
            if set(got) != set(sub) | carried:
                problems.append("names %s, expected %s" % (sorted(got), sorted(set(sub) | carried)))
        rep.check("%s: --from %s" % (name, key), problems)
    # --dtype bfloat16
    if sd is not None:
        bp = os.path.join(out, name + ".bf16.pt")
        rc, _, err = run(tool, "consolidate", "-q", sample, "-o", bp, "--dtype", "bfloat16")
        problems = ["consolidate --dtype bfloat16 exited %d: %s" % (rc, err.strip())] if rc else []
        if not rc:
            got = torch.load(bp, weights_only=True)
            for k, v in sd.items():
                if not isinstance(v, torch.Tensor):
                    continue
                w = v.to(torch.bfloat16) if dname(v) in FLOATS else v
                if k not in got or dname(got[k]) != dname(w) or sha(got[k]) != sha(w):
                    problems.append("%s: not %s.to(bfloat16) bit for bit" % (k, k))
        rep.check("%s: --dtype bfloat16 casts as torch does" % name, problems)
    # sharded sets
    for fmt, pattern in (("safetensors", "*.safetensors"), ("pt", "*.bin")):
        d = os.path.join(out, name + ".set-" + fmt)
        shutil.rmtree(d, ignore_errors=True)
        rc, _, err = run(tool, "consolidate", "-q", sample, "-o", d + "/", "--format", fmt, "--max-shard-size", "300")
        problems = ["consolidate --max-shard-size exited %d: %s" % (rc, err.strip())] if rc else []
        if not rc:
            got = {}
            shards = sorted(glob.glob(os.path.join(d, pattern)))
            for f in shards:
                part = st_facts(f) if fmt == "safetensors" else from_pt(torch.load(f, weights_only=True))
                for k in part:
                    if k in got:
                        problems.append("%s in two shards" % k)
                got.update(part)
            problems += compare_tensors(got, want)
            idx = glob.glob(os.path.join(d, "*.index.json"))
            wm = json.load(open(idx[0]))["weight_map"] if len(idx) == 1 else {}
            if sorted(wm) != sorted(want):
                problems.append("the index maps %d names, expected %d" % (len(wm), len(want)))
            if len(shards) < 2:
                problems.append("only %d shard(s): the set checked no sharding" % len(shards))
        rep.check("%s: sharded %s set" % (name, fmt), problems)
    # against dcp_to_torch_save itself, where this torch has it
    try:
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
        import torch.distributed.checkpoint as dcp
    except ImportError:
        print("note: torch %s has no dcp_to_torch_save: checked against the expect file's SHA-256s only"
              % torch.__version__)
        return
    if sd is None:
        return
    ref_path = os.path.join(out, name + ".ref.pt")
    dcp_to_torch_save(sample, ref_path)
    ref = torch.load(ref_path, weights_only=False)
    md = dcp.FileSystemReader(sample).read_metadata()
    problems, n = [], 0
    for fqn in md.state_dict_metadata:
        v = ref
        for k in (md.planner_data or {}).get(fqn, (fqn,)):
            v = v[k]
        if isinstance(v, torch.Tensor):
            n += 1
            g = sd.get(fqn)
            if not isinstance(g, torch.Tensor) or g.dtype != v.dtype or g.shape != v.shape or \
                    torch_verify.tensor_bytes(g) != torch_verify.tensor_bytes(v):
                problems.append("%s differs from dcp_to_torch_save's" % fqn)
        elif fqn in sd and jsonable(sd[fqn]) != jsonable(v):
            problems.append("item %s is %r, dcp_to_torch_save gives %r" % (fqn, sd[fqn], v))
    if not n:
        problems.append("dcp_to_torch_save gave no tensor: nothing compared")
    rep.check("%s: %d tensors bit for bit as dcp_to_torch_save (torch %s)" % (name, n, torch.__version__), problems)


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    tool, out, samples = sys.argv[1], sys.argv[2], sys.argv[3:]
    out = out_dir(out, torch)
    rep = Report()
    for s in samples:
        s = s.rstrip("/")
        if not os.path.isdir(s) or not os.path.exists(s + ".expect.json"):
            rep.check(s, ["no such distributed checkpoint, or no expect file beside it"])
            continue
        with open(s + ".expect.json") as f:
            check_sample(tool, out, s, json.load(f), rep)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
