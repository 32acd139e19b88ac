"""convert and extract agree, judged by torch (and the safetensors library where it imports).

    check_convert_weights.py TENSORCTL SAMPLES OUTDIR

On the bundled training checkpoints (sample_models/optimizer_ckpt_cuda1.pt: 'model' beside
'optimizer' and counters; lightning_dp_cpu.ckpt: 'state_dict' beside optimizer_states, loops,
callbacks) and a plain state_dict (tiny_mlp_cuda0.pt), against what torch.load gives:
  - convert IN OUT.safetensors without --from writes the weights extract picks: exactly the
    tensors under that entry, named relative to it, bit for bit; byte for byte extract's output
    (extract --from KEY, and --key KEY, its alias); --from . writes every tensor of the file
  - convert IN NAME.safetensors.index.json --max-shard-size 100 (and NAME.bin.index.json) writes
    a sharded set from the one file: several shards named as transformers names them, the index
    mapping each tensor to the shard that holds it, and every shard, loaded by
    safetensors.torch.load_file / torch.load(weights_only=True), gives the tensors the index maps
    there, equal to the input's; the same set as extract -o NAME.index.json --max-shard-size 100
  - a plain state_dict converts whole (nothing is left out of a file that is no training checkpoint)
Prints PASS/FAIL per check, then 'N passed, N failed'; exit 1 on a failure, 77 without torch.
"""
import filecmp
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import st_read  # noqa: E402
import torch_verify  # noqa: E402

try:
    from safetensors.torch import load_file
except ImportError:  # the judges' own reader stands in (st_read); the library's load is checked where it is
    load_file = None

CASES = [("optimizer_ckpt_cuda1.pt", "model"), ("lightning_dp_cpu.ckpt", "state_dict"), ("tiny_mlp_cuda0.pt", None)]


def reference(path, key):
    """The tensors torch.load gives, flattened ('.'-joined paths), under key (named relative to it) when given."""
    obj = torch_verify.load_checkpoint(path).obj
    flat = {".".join(p): t.detach() for p, t in torch_verify.flatten(obj).items()}
    if key is None:
        return flat
    return {n[len(key) + 1:]: t for n, t in flat.items() if n.startswith(key + ".")}


def differ(got, want):
    """Problems: names in one and not the other, tensors not equal bit for bit (dtype, shape, bytes)."""
    bad = ["missing %s" % n for n in sorted(set(want) - set(got))]
    bad += ["unexpected %s" % n for n in sorted(set(got) - set(want))]
    for n in sorted(set(got) & set(want)):
        g, w = got[n], want[n]
        if g.dtype != w.dtype or list(g.shape) != list(w.shape) or torch_verify.tensor_bytes(g) != \
                torch_verify.tensor_bytes(w):
            bad.append("%s: %s %s differs from the input's %s %s" % (n, g.dtype, list(g.shape), w.dtype,
                                                                        list(w.shape)))
    return bad


def load_st(path):
    return load_file(path) if load_file else dict(st_read.read_tensors(path))


def load_pt(path):
    kw = {"weights_only": True} if torch_verify.torch_major() >= 2 else {}
    obj = torch.load(path, map_location="cpu", **kw)
    return {k: v for k, v in obj.items()}


def check_set(rep, what, index, want, st):
    d = os.path.dirname(index)
    try:
        with open(index) as f:
            wm = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError) as e:
        rep.check(what + ": the index", [str(e)])
        return
    files = sorted(set(wm.values()))
    pat = "model-%05d-of-%05d.safetensors" if st else "pytorch_model-%05d-of-%05d.bin"
    rep.check(what + ": %d shards (more than one), named as transformers names them" % len(files),
              [] if len(files) > 1 and files == [pat % (i + 1, len(files)) for i in range(len(files))] else [files])
    got, bad = {}, []
    for fn in files:
        ts = (load_st if st else load_pt)(os.path.join(d, fn))
        mapped = {k for k, v in wm.items() if v == fn}
        bad += ["%s: maps %s, holds %s" % (fn, sorted(mapped), sorted(ts))] if set(ts) != mapped else []
        got.update(ts)
    reader = ("safetensors.load_file" if load_file else "the format's reader") if st else "torch.load"
    rep.check("%s: %s of every shard gives what the index maps there, equal to the input's (torch %s)"
              % (what, reader, torch.__version__), bad + differ(got, want))


def main():
    tool, samples, base = sys.argv[1:4]
    out = out_dir(base, torch)
    rep = Report()
    for name, key in CASES:
        path = os.path.join(samples, name)
        stem = name.rsplit(".", 1)[0]
        want = reference(path, key)
        every = reference(path, None)
        st = os.path.join(out, stem + ".safetensors")
        rc, _, err = run([tool, "convert", "-q", path, st])
        if rep.check("%s: convert to safetensors exits 0" % name, ["exit %d: %s" % (rc, err.strip())] if rc else []):
            rep.check("%s: convert writes %s, equal to torch.load's (torch %s, %s)"
                      % (name, "the weights under '%s', named relative to it" % key if key else "every tensor",
                         torch.__version__, "safetensors.load_file" if load_file else "the format's reader"),
                      differ(load_st(st), want))
        if key:
            for opt in ("--from", "--key"):
                ex = os.path.join(out, stem + ".extract" + opt[1:] + ".safetensors")
                rc, _, err = run([tool, "extract", "-q", path, opt, key, "-o", ex])
                rep.check("%s: convert's output is byte for byte extract %s %s's" % (name, opt, key),
                          ["exit %d: %s" % (rc, err.strip())] if rc else
                          [] if os.path.exists(st) and filecmp.cmp(st, ex, shallow=False) else ["the files differ"])
            whole = os.path.join(out, stem + ".all.safetensors")
            rc, _, err = run([tool, "convert", "-q", path, whole, "--from", "."])
            rep.check("%s: convert --from . writes every tensor of the file, equal to torch.load's" % name,
                      ["exit %d: %s" % (rc, err.strip())] if rc else differ(load_st(whole), every))
        for ext, is_st in ((".safetensors.index.json", True), (".bin.index.json", False)):
            d = os.path.join(out, stem + ext.split(".")[1] + "-set")
            os.makedirs(d, exist_ok=True)
            index = os.path.join(d, ("model" if is_st else "pytorch_model") + ext)
            rc, _, err = run([tool, "convert", "-q", "-f", path, index, "--max-shard-size", "100"])
            if rep.check("%s: convert to %s --max-shard-size 100 exits 0" % (name, os.path.basename(index)),
                         ["exit %d: %s" % (rc, err.strip())] if rc else []):
                check_set(rep, "%s -> %s" % (name, os.path.basename(index)), index, want, is_st)
            if is_st:
                ed = os.path.join(out, stem + "-extract-set")
                os.makedirs(ed, exist_ok=True)
                eindex = os.path.join(ed, os.path.basename(index))
                rc, _, err = run([tool, "extract", "-q", "-f", path, "-o", eindex, "--max-shard-size", "100"])
                same = ["exit %d: %s" % (rc, err.strip())] if rc else []
                for fn in ([] if rc else sorted(os.listdir(d))):
                    if not os.path.exists(os.path.join(ed, fn)) or \
                            not filecmp.cmp(os.path.join(d, fn), os.path.join(ed, fn), shallow=False):
                        same.append("%s differs" % fn)
                rep.check("%s: convert's set is extract's, file for file (--max-shard-size means the same)" % name,
                          same)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
