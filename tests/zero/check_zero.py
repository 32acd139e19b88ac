#!/usr/bin/env python3
"""Judge `tensorctl consolidate` of DeepSpeed ZeRO checkpoints with real torch (no DeepSpeed).

    check_zero.py TENSORCTL OUTDIR CASE_DIR...
    check_zero.py TENSORCTL OUTDIR --all FOLDER     (every save folder in FOLDER)

Every CASE_DIR is a DeepSpeed save folder with CASE_DIR.reference.pt beside it: what DeepSpeed's
get_fp32_state_dict_from_zero_checkpoint returned for it, saved with torch.save (made by
sample_models/zero/make_zero_samples.py, or the shared corpus). For each:
  * consolidate DIR -o OUT.pt: OUT.pt loads with torch.load(weights_only=True) under this torch
    (1.13 or 2.x) and equals the reference: the same names in the same order, each tensor's dtype,
    shape, requires_grad and bytes; names that are one tensor in the reference (tied weights) are
    one tensor in OUT.pt, and no others;
  * the same bytes when given the step folder, or one of its rank files, instead of the save folder;
  * .safetensors: the same tensors (read from the file itself; a tied name as its own tensor or as
    tensorctl's alias record);
  * a sharded set (--max-shard-size), and the same set written in two parts (--part 1/2, 2/2, then
    --part index): together the reference's tensors, each once;
  * --dtype bfloat16: each floating-point tensor is the reference's .to(torch.bfloat16), bit for bit;
  * key surgery (--add-prefix, --drop): the names the options give, the tensors unchanged;
  * --exclude-frozen: the reference less the frozen parameters (those DeepSpeed records in
    frozen_param_shapes) and the names tied to them (or CASE_DIR.exclude_frozen.reference.pt where
    the generator made one with DeepSpeed itself);
  * --tag TAG for each CASE_DIR.TAG.reference.pt: that step's state_dict.
A CASE_DIR without a reference is one DeepSpeed's converter refused: consolidate must refuse it too,
with one line, writing nothing. One line per check, then `N passed, M failed`. Exit 0, 1 on any failure, 2 on bad usage, 77 when
torch cannot be imported.
"""
import glob
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
from torch_verify import FLOATS, facts, st_facts, tensor_bytes as tbytes, tensor_dtype as dname  # noqa: E402
from torch_verify import load_weights_only as load  # noqa: E402

warnings.filterwarnings("ignore")


def same_groups(sd):
    """The sets of names that are one tensor (one storage viewed whole, at one offset)."""
    by = {}
    for k, v in sd.items():
        by.setdefault((v.untyped_storage().data_ptr() if hasattr(v, "untyped_storage") else v.storage().data_ptr(),
                       v.storage_offset(), tuple(v.shape), str(v.dtype)), []).append(k)
    return sorted(sorted(g) for g in by.values() if len(g) > 1)


def compare(got, want, what, rg=True):
    """Problems of state_dict got against want: names and order, then tensor for tensor."""
    problems = []
    if list(got) != list(want):
        problems.append("%s: names %s, expected %s" % (what, list(got)[:8], list(want)[:8]))
    for k, w in want.items():
        g = got.get(k)
        if not isinstance(g, torch.Tensor):
            problems.append("%s: %s missing" % (what, k))
            continue
        if (dname(g), list(g.shape)) != (dname(w), list(w.shape)):
            problems.append("%s: %s is %s %s, expected %s %s" % (what, k, dname(g), list(g.shape), dname(w),
                                                                  list(w.shape)))
        elif tbytes(g) != tbytes(w):
            problems.append("%s: %s differs in its bytes" % (what, k))
        elif rg and g.requires_grad != w.requires_grad:
            problems.append("%s: %s requires_grad %s, expected %s" % (what, k, g.requires_grad, w.requires_grad))
    return problems


def frozen_names(case):
    """The frozen parameters DeepSpeed records for a case (its model file 0, loaded as DeepSpeed loads it)."""
    tag = open(os.path.join(case, "latest")).read().strip()
    files = sorted(glob.glob(os.path.join(case, tag, "*_model_states.pt")))
    m = torch.load(files[0], map_location="cpu", weights_only=True)
    return list((m.get("frozen_param_shapes") or {}).keys()), dict(m["shared_params"])


def check_case(tool, out, case, rep):
    name = os.path.basename(case.rstrip("/"))
    ref = load(case + ".reference.pt")
    if not ref:
        rep.check("%s: reference" % name, ["the reference holds no tensor: it would check nothing"])
        return
    # .pt
    pt = os.path.join(out, name + ".pt")
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", pt)
    problems = ["consolidate exited %d: %s" % (rc, err.strip())] if rc else []
    sd = None
    if not rc:
        try:
            sd = load(pt)
        except Exception as e:  # noqa: BLE001
            problems.append("torch.load(weights_only=True) failed: %s" % e)
    if sd is not None:
        problems += compare(sd, ref, ".pt")
        if same_groups(sd) != same_groups(ref):
            problems.append("tied names %s, the reference's %s" % (same_groups(sd), same_groups(ref)))
    rep.check("%s: .pt loads with weights_only=True (torch %s), equals DeepSpeed's state_dict bit for bit" %
              (name, torch.__version__), problems)
    if sd is None:
        return
    # the step folder and a rank file name the same checkpoint
    tag = open(os.path.join(case, "latest")).read().strip()
    ranks = sorted(glob.glob(os.path.join(case, tag, "*_optim_states.pt")))
    problems = []
    for i, src in enumerate([os.path.join(case, tag), ranks[-1]]):
        p = os.path.join(out, "%s.via%d.pt" % (name, i))
        rc, _, err = run(tool, "consolidate", "-q", src, "-o", p)
        if rc:
            problems.append("consolidate %s exited %d: %s" % (src, rc, err.strip()))
        else:
            problems += compare(load(p), ref, src)
    rep.check("%s: the step folder and a rank file give the same state_dict" % name, problems)
    # .safetensors
    stf = os.path.join(out, name + ".safetensors")
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", stf)
    problems = ["consolidate exited %d: %s" % (rc, err.strip())] if rc else []
    if not rc:
        got, want = st_facts(stf), facts(ref)
        if sorted(got) != sorted(want):
            problems.append("names %s, expected %s" % (sorted(got), sorted(want)))
        problems += ["%s: %s, expected %s" % (k, got.get(k), v) for k, v in want.items() if got.get(k) != v]
    rep.check("%s: .safetensors holds the same tensors" % name, problems)
    # sharded sets, in one process and in two parts
    for fmt, pattern in (("safetensors", "*.safetensors"), ("pt", "*.bin")):
        for parts in (None, 2):
            d = os.path.join(out, "%s.set-%s%s" % (name, fmt, "-parts" if parts else ""))
            shutil.rmtree(d, ignore_errors=True)
            base = ["consolidate", "-q", case, "-o", d + "/", "--format", fmt, "--max-shard-size", "4000"]
            steps = [base] if not parts else [base + ["--part", "%d/%d" % (i, parts)] for i in (1, 2)] + \
                [base + ["--part", "index"]]
            problems = []
            for s in steps:
                rc, _, err = run(tool, *s)
                if rc:
                    problems.append("%s exited %d: %s" % (" ".join(s[4:]), rc, err.strip()))
            if not problems:
                got = {}
                shards = sorted(glob.glob(os.path.join(d, pattern)))
                for f in shards:
                    part = st_facts(f) if fmt == "safetensors" else facts(load(f))
                    for k in part:
                        if k in got:
                            problems.append("%s in two shards" % k)
                    got.update(part)
                want = facts(ref)
                if sorted(got) != sorted(want):
                    problems.append("names %s, expected %s" % (sorted(got), sorted(want)))
                problems += ["%s differs" % k for k, v in want.items() if got.get(k) != v]
                if len(shards) < 2:
                    problems.append("only %d shard(s): the set checked no sharding" % len(shards))
            rep.check("%s: sharded %s set%s" % (name, fmt, " written in 2 parts" if parts else ""), problems)
    # --dtype bfloat16
    bp = os.path.join(out, name + ".bf16.pt")
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", bp, "--dtype", "bfloat16")
    problems = ["consolidate --dtype bfloat16 exited %d: %s" % (rc, err.strip())] if rc else []
    if not rc:
        want = {k: (v.detach().to(torch.bfloat16) if dname(v) in FLOATS else v) for k, v in ref.items()}
        problems += compare(load(bp), want, "--dtype bfloat16", rg=False)
    rep.check("%s: --dtype bfloat16 casts as torch does" % name, problems)
    # key surgery
    kp = os.path.join(out, name + ".keys.pt")
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", kp, "--add-prefix", "model.", "--drop", "ln*")
    problems = ["consolidate --add-prefix --drop exited %d: %s" % (rc, err.strip())] if rc else []
    if not rc:
        want = {"model." + k: v for k, v in ref.items() if not k.startswith("ln")}
        problems += compare(load(kp), want, "key surgery")
    rep.check("%s: --add-prefix model. --drop 'ln*'" % name, problems)
    # --exclude-frozen
    xp = os.path.join(out, name + ".nofrozen.pt")
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", xp, "--exclude-frozen")
    problems = ["consolidate --exclude-frozen exited %d: %s" % (rc, err.strip())] if rc else []
    if not rc:
        if os.path.exists(case + ".exclude_frozen.reference.pt"):
            want = load(case + ".exclude_frozen.reference.pt")
        else:
            frozen, shared = frozen_names(case)
            gone = set(frozen) | {a for a, s in shared.items() if s in frozen}
            want = {k: v for k, v in ref.items() if k not in gone}
        problems += compare(load(xp), want, "--exclude-frozen")
    rep.check("%s: --exclude-frozen" % name, problems)
    # --tag
    for r in sorted(glob.glob(case + ".global_step*.reference.pt")):
        t = os.path.basename(r)[len(name) + 1:-len(".reference.pt")]
        tp = os.path.join(out, "%s.%s.pt" % (name, t))
        rc, _, err = run(tool, "consolidate", "-q", case, "--tag", t, "-o", tp)
        problems = ["consolidate --tag %s exited %d: %s" % (t, rc, err.strip())] if rc else []
        if not rc:
            problems += compare(load(tp), load(r), "--tag " + t)
        rep.check("%s: --tag %s" % (name, t), problems)


def check_refused(tool, out, case, rep):
    """A case DeepSpeed's converter refused (no reference): refused with one line, nothing written."""
    name = os.path.basename(case.rstrip("/"))
    pt = os.path.join(out, name + ".pt")
    rc, _, err = run(tool, "consolidate", "-q", case, "-o", pt)
    lines = err.strip().splitlines()
    problems = ["accepted, but DeepSpeed's converter refuses it"] if not rc else []
    if rc and (len(lines) != 1 or not lines[0].startswith("tensorctl: %s" % case)):
        problems.append("not one line naming the case: %s" % lines)
    if os.path.exists(pt):
        problems.append("wrote %s" % pt)
    rep.check("%s: refused as DeepSpeed's converter refuses it: %s" % (name, lines[0] if lines else ""), problems)


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    tool, base, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    if cases[0] == "--all":  # every save folder of a folder (the shared corpus)
        top = cases[1]
        cases = sorted(os.path.join(top, n) for n in os.listdir(top)
                       if os.path.isfile(os.path.join(top, n, "latest")))
    out = out_dir(base, torch)
    rep = Report()
    for case in cases:
        if not os.path.exists(case + ".reference.pt"):
            check_refused(tool, out, case, rep)
            continue
        check_case(tool, out, case, rep)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
