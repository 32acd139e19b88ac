#!/usr/bin/env python3
"""Check tensorctl's device moves and casts against real PyTorch.

    check_convert.py [-v] [--keep] [--only FEATURE[,FEATURE...]] TENSORCTL OUTDIR FILE...
    check_convert.py --features     the features (FEATURES below), one a line

TENSORCTL is the binary (or a command line, split like a shell would). For every FILE:
  * to-cpu, to-cuda --device cuda:1, to-cpu/to-cuda --map (a map chosen from the file's devices),
    to-cpu --dtype bfloat16, to-cpu --dtype float16 and to-cuda --dtype bfloat16 are run; each
    output must be written (exit 0), load in torch and equal the input bit for bit (or
    input.to(T) for a cast), keep shapes, strides, offsets, parameters and storage sharing, carry
    the expected location tags, load with a plain torch.load where it is all-cpu, and load with
    weights_only=True wherever the input does;
  * `inspect --json` of input and output may differ only in device (and dtype/nbytes of cast
    tensors);
  * the input file must be byte-identical afterwards;
  * a file that inspect flags as dangerous (dangerous_globals, or unsafe_globals when the tool
    reports no dangerous_globals) must be refused: non-zero exit and no OUT.
Files this torch cannot load (float8 / _rebuild_tensor_v3 files under torch 1.x, safetensors) have
their torch checks reported as skipped.

The features (--only; meson registers one test for each, torch-convert/FEATURE): moves (to-cpu,
to-cuda --device cuda:1), maps (the --map runs), casts (the --dtype runs), refusals (the dangerous
files and those whose globals must be admitted). Each runs its checks on every FILE it concerns,
and checks that FILE is byte-identical afterwards.

One line per check (PASS/FAIL/SKIP), then `N passed, M failed, K skipped`.
An input for which no check of a feature concerning it ran (everything skipped) is a failure, and
so is a run that checked nothing: it never passes.
Exit 0, 1 on any failure, 2 on bad usage, 77 when torch cannot be imported.
To test this checker itself, pass the torch-based stand-in as TENSORCTL:
    "python3 tests/torch_verify.py reference-tool"
"""

import hashlib
import json
import os
import shlex
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from judge import features  # noqa: E402

# One meson test per feature. --features is answered before torch is imported: meson asks at
# configure time, with a Python that may lack it.
FEATURES = ["moves", "maps", "casts", "refusals"]
if __name__ == "__main__" and sys.argv[1:2] == ["--features"]:
    features(sys.argv[1:], FEATURES)

import torch_verify  # noqa: E402
from torch_verify import torch  # noqa: E402

warnings.filterwarnings("ignore")

CAST_DTYPE_SIZES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
                    "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}
FLOAT_NAMES = set(CAST_DTYPE_SIZES)


class Report:
    def __init__(self, verbose=False):
        self.passed = self.failed = self.skipped = 0
        self.verbose = verbose

    def ok(self, what, detail=""):
        self.passed += 1
        print("PASS %s%s" % (what, (": " + detail) if detail and self.verbose else ""))

    def fail(self, what, detail):
        self.failed += 1
        print("FAIL %s: %s" % (what, detail))

    def skip(self, what, why):
        self.skipped += 1
        print("SKIP %s: %s" % (what, why))

    def check(self, what, problems, notes=()):
        if problems:
            shown = problems[:8] + (["... %d more" % (len(problems) - 8)] if len(problems) > 8 else [])
            self.fail(what, "; ".join(shown))
        else:
            self.ok(what, "; ".join(notes))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run(cmd, timeout=600):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return -1, "", "timed out after %ds" % timeout
    except OSError as e:
        return -1, "", str(e)


def inspect_json(tool, path, extra=()):
    rc, out, err = run(tool + ["inspect", "--json"] + list(extra) + [path])
    try:
        return json.loads(out), rc, err
    except ValueError:
        return None, rc, err.strip().splitlines()[-1] if err.strip() else "no JSON on stdout"


def dangerous_of(info):
    if "dangerous_globals" in info:
        return list(info.get("dangerous_globals") or [])
    return list(info.get("unsafe_globals") or [])


def dtype_size(name):
    if name in CAST_DTYPE_SIZES:
        return CAST_DTYPE_SIZES[name]
    try:
        return torch.empty(0, dtype=getattr(torch, name)).element_size()
    except Exception:
        return None


def inspect_diff(a, b, device=None, maps=None, dtype=None):
    """Problems between inspect --json of input a and output b."""
    problems = []
    legacy_upgrade = a.get("format") == "torch-legacy" and b.get("format") == "torch-zip"
    if a.get("format") != b.get("format") and not legacy_upgrade:
        problems.append("format %s became %s" % (a.get("format"), b.get("format")))
    ta, tb = a.get("tensors") or [], b.get("tensors") or []
    if len(ta) != len(tb):
        return problems + ["%d tensors in input, %d in output" % (len(ta), len(tb))]
    part_a, part_b = {}, {}
    for i, (x, y) in enumerate(zip(ta, tb)):
        name = x.get("name", "#%d" % i)
        skip = {"device", "storage"}
        cast = False
        if dtype and x.get("dtype") in FLOAT_NAMES and x.get("dtype") != dtype:
            skip |= {"dtype", "nbytes"}
            if y.get("dtype") == dtype:
                cast = True
            elif y.get("dtype") != x.get("dtype"):
                problems.append("%s: dtype %s, expected %s (or kept %s)" % (name, y.get("dtype"), dtype, x.get("dtype")))
        for k in sorted(set(x) | set(y)):
            if k not in skip and x.get(k) != y.get(k):
                problems.append("%s: %s %r became %r" % (name, k, x.get(k), y.get(k)))
        if cast and isinstance(x.get("nbytes"), (int, float)):
            sa, sb = dtype_size(x["dtype"]), dtype_size(dtype)
            if sa and sb and y.get("nbytes") != x["nbytes"] // sa * sb:
                problems.append("%s: nbytes %r, expected %r" % (name, y.get("nbytes"), x["nbytes"] // sa * sb))
        want = torch_verify.expected_device(x.get("device"), device, maps)
        if y.get("device") != want:
            problems.append("%s: device %r, expected %r" % (name, y.get("device"), want))
        if x.get("storage") is not None:
            part_a.setdefault(x["storage"], []).append(i)
        if y.get("storage") is not None:
            part_b.setdefault(y["storage"], []).append(i)
    if sorted(part_a.values()) != sorted(part_b.values()):
        problems.append("tensors are grouped into storages differently")
    return problems


def variants_for(devices):
    """(label, tensorctl args, verify kwargs). devices: set of location tags in the file."""
    v = [("to-cpu", ["to-cpu"], {"device": "cpu"}),
         ("to-cuda:1", ["to-cuda", "--device", "cuda:1"], {"device": "cuda:1"})]
    cudas = sorted(d for d in devices if d.startswith("cuda"))
    if "cuda:1" in devices:
        v.append(("to-cpu --map cuda:1=cuda:0", ["to-cpu", "--map", "cuda:1=cuda:0"],
                  {"maps": {"cuda:1": "cuda:0"}}))
    if "cuda:0" in devices:
        v.append(("to-cpu --map cuda:0=cpu", ["to-cpu", "--map", "cuda:0=cpu"], {"maps": {"cuda:0": "cpu"}}))
    if len(cudas) >= 2:
        v.append(("to-cpu --map cuda:0=cpu --map cuda:1=cuda:0",
                  ["to-cpu", "--map", "cuda:0=cpu", "--map", "cuda:1=cuda:0"],
                  {"maps": {"cuda:0": "cpu", "cuda:1": "cuda:0"}}))
    if not cudas:
        v.append(("to-cuda --map cpu=cuda:1", ["to-cuda", "--map", "cpu=cuda:1"], {"maps": {"cpu": "cuda:1"}}))
    v += [("to-cpu --dtype bfloat16", ["to-cpu", "--dtype", "bfloat16"], {"device": "cpu", "dtype": "bfloat16"}),
          ("to-cpu --dtype float16", ["to-cpu", "--dtype", "float16"], {"device": "cpu", "dtype": "float16"}),
          ("to-cuda --dtype bfloat16", ["to-cuda", "--dtype", "bfloat16"], {"device": "cuda:0", "dtype": "bfloat16"})]
    return v


def feature_of(label):
    """The feature a run of variants_for belongs to."""
    return "casts" if "--dtype" in label else "maps" if "--map" in label else "moves"


def slug(label):
    return "".join(c if c.isalnum() else "_" for c in label).strip("_")


def check_file(tool, outdir, path, rep, keep=False, only=None):
    """The checks of the features only (all when None) on path. False when none of them concerns it
    (a safe file's refusals, a dangerous file's rewrites), else True."""
    only = FEATURES if only is None else only
    base = os.path.basename(path)
    tv = "torch " + torch.__version__
    if not os.path.isfile(path):
        rep.fail(base, "no such file")
        return True
    if torch_verify.is_safetensors(path):
        rep.skip(base, "safetensors file: no torch location tags to move (%s)" % tv)
        return True
    before = sha256_file(path)
    stem, ext = os.path.splitext(base)
    ext = ext or ".pt"

    info, rc, err = inspect_json(tool, path)
    if info is None:
        rep.fail("%s inspect --json" % base, "exit %s, %s" % (rc, err))
        return True
    try:
        scan = torch_verify.scan_pickle(path)
        judge_bad = torch_verify.refused_globals(scan["globals"])
    except Exception as e:  # noqa: BLE001
        scan, judge_bad = None, []
        rep.fail("%s pickle scan" % base, "%s: %s" % (type(e).__name__, e))
    flagged = dangerous_of(info)

    if flagged or judge_bad:
        if "refusals" not in only:
            return False
        missed = [g for g in judge_bad if g not in flagged]
        rep.check("%s inspect flags dangerous globals" % base,
                  ["inspect does not flag %s" % ", ".join(missed)] if missed else [],
                  ["flagged %s" % ", ".join(flagged)])
        for label, args, _ in variants_for({"cpu", "cuda:0"})[:2] + [("to-cpu --dtype bfloat16", ["to-cpu", "--dtype", "bfloat16"], {})]:
            out = os.path.join(outdir, "%s.%s%s" % (stem, slug(label), ext))
            if os.path.exists(out):
                os.remove(out)
            rc, _, err = run(tool + args + [path, "-o", out])
            problems = []
            if rc == 0:
                problems.append("exit 0: a dangerous file was rewritten")
            if os.path.exists(out):
                problems.append("OUT was left behind")
                if not keep:
                    os.remove(out)
            rep.check("%s %s refused" % (base, label), problems, ["exit %d" % rc])
        rep.check("%s input unchanged" % base, [] if sha256_file(path) == before else ["input bytes changed"])
        return True

    # a file that is not safe to load only because of globals outside the allowlist: refused as it is,
    # rewritten once the user admits exactly those globals (--safe-globals)
    unsafe = list(info.get("unsafe_globals") or [])
    variants = [v for v in variants_for(set(s["location"] for s in scan["storages"]) if scan else set())
                if feature_of(v[0]) in only]
    if not variants and not (unsafe and "refusals" in only):
        return False
    extra = []
    if unsafe and "refusals" in only:
        out = os.path.join(outdir, "%s.refused%s" % (stem, ext))
        if os.path.exists(out):
            os.remove(out)
        rc, _, err = run(tool + ["to-cpu", path, "-o", out])
        problems = []
        if rc != 4:
            problems.append("exit %d: an unsafe file was rewritten without --safe-globals" % rc)
        if os.path.exists(out):
            problems.append("OUT was left behind")
            os.remove(out)
        if "--safe-globals" not in err or not all(g in err for g in unsafe[:2]):
            problems.append("the refusal does not name --safe-globals and the globals: %s" % err.strip())
        rep.check("%s unsafe globals refused until admitted" % base, problems, ["unsafe: %s" % ", ".join(unsafe)])
    if unsafe:
        extra = ["--safe-globals", ",".join(unsafe)]
    try:
        inp = torch_verify.load_checkpoint(path)
        load_err = None
    except Exception as e:  # noqa: BLE001
        inp, load_err = None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    del inp
    for label, args, kw in variants:
        what = "%s %s" % (base, label)
        out = os.path.join(outdir, "%s.%s%s" % (stem, slug(label), ext))
        if os.path.exists(out):
            os.remove(out)
        rc, _, err = run(tool + args + extra + [path, "-o", out])
        if rc != 0 or not os.path.exists(out):
            last = err.strip().splitlines()[-1] if err.strip() else ""
            rep.fail(what, "exit %d%s %s" % (rc, "" if os.path.exists(out) else ", no OUT", last))
            continue
        rep.ok(what + " runs")
        if load_err:
            rep.skip(what + " torch", "%s cannot load the input: %s" % (tv, load_err))
        else:
            try:
                problems, notes = torch_verify.verify_output(path, out, **kw)
            except Exception as e:  # noqa: BLE001
                problems, notes = ["judge error %s: %s" % (type(e).__name__, e)], []
            rep.check(what + " torch (%s)" % tv, problems, notes)
        oinfo, orc, oerr = inspect_json(tool, out, extra)
        if oinfo is None:
            rep.fail(what + " inspect", "inspect --json OUT: exit %s, %s" % (orc, oerr))
        else:
            rep.check(what + " inspect", inspect_diff(info, oinfo, device=kw.get("device"),
                                                      maps=kw.get("maps"), dtype=kw.get("dtype")))
        if not keep:
            os.remove(out)
    rep.check("%s input unchanged" % base, [] if sha256_file(path) == before else ["input bytes changed"])
    return True


def main(argv=None):
    only, argv = features(sys.argv[1:] if argv is None else argv, FEATURES)
    verbose = keep = False
    while argv and argv[0].startswith("-"):
        opt = argv.pop(0)
        if opt in ("-v", "--verbose"):
            verbose = True
        elif opt == "--keep":
            keep = True
        elif opt in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print("check_convert: unknown option %s" % opt)
            return 2
    if len(argv) < 3:
        print(__doc__)
        return 2
    if torch is None:
        print("check_convert: torch is not importable by %s; skipping" % sys.executable)
        return 77
    tool = shlex.split(argv[0])
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    rep = Report(verbose)
    print("# check_convert with torch %s (%s): %s" % (torch.__version__, sys.executable, ", ".join(only)))
    for path in argv[2:]:
        ran = rep.passed + rep.failed
        if check_file(tool, outdir, path, rep, keep, only) and rep.passed + rep.failed == ran:
            rep.fail(os.path.basename(path), "no check ran for this input (every check skipped)")
    print("%d passed, %d failed, %d skipped" % (rep.passed, rep.failed, rep.skipped))
    if rep.passed + rep.failed == 0:
        print("FAIL: no check ran")
        return 1
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
