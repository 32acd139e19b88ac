#!/usr/bin/env python3
"""Self-test of the torch judges: torch_verify.py and check_convert.py, judged against the torch-based
stand-in for tensorctl that torch_verify.py carries (`reference-tool`, run in this process).

    verify_selftest.py SAMPLES_DIR CORPUS_DIR OUTDIR      (run_with_torch.sh runs it under each torch)

CORPUS_DIR: sample_models/corpus (or the reference corpus, laid out alike).

1. Right outputs are accepted: the reference tool's to-cpu, to-cuda --device cuda:1, --map and
   --dtype bfloat16 outputs of each input pass torch_verify.verify_output.
2. Wrong outputs are rejected: each defect the reference tool injects (TORCH_VERIFY_REFERENCE_BUG=
   flip-bit, untie, contiguous, unparam, drop, truncate-cast, keep-cuda), on an input and a command
   where it changes the output, must make verify_output report the problem that names it (so each
   of the judge's checks is shown to work, not just one of them).
3. check_convert.check_file, with the reference tool standing in for tensorctl, passes the right
   tool (and its refusal of malicious.pt) and fails the tool that flips a bit.
4. A checkpoint with no tensor is rejected: a comparison of nothing proves nothing.
One line per check, then a count. Exit 0 when every judge behaved, 1 when one accepted a wrong
output or rejected a right one (or nothing was checked), 2 on bad usage, 77 only when torch
cannot be imported.
"""

import contextlib
import io
import os
import sys
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_verify  # noqa: E402

if torch_verify.torch is None:
    print("SKIP: torch is not importable by %s" % sys.executable)
    sys.exit(77)
import check_convert  # noqa: E402
from judge import corpus_file  # noqa: E402

warnings.filterwarnings("ignore")
BUG = "TORCH_VERIFY_REFERENCE_BUG"

TO_CPU = ("to-cpu", ["to-cpu"], {"device": "cpu"})
TO_CUDA1 = ("to-cuda --device cuda:1", ["to-cuda", "--device", "cuda:1"], {"device": "cuda:1"})
MAP = ("to-cpu --map cuda:1=cuda:0", ["to-cpu", "--map", "cuda:1=cuda:0"], {"maps": {"cuda:1": "cuda:0"}})
BF16 = ("to-cpu --dtype bfloat16", ["to-cpu", "--dtype", "bfloat16"], {"device": "cpu", "dtype": "bfloat16"})

# (input, where: 'S' samples or 'C' corpus, the commands it is rewritten with)
INPUTS = [
    ("tiny_mlp_cuda0.pt", "S", [TO_CPU, TO_CUDA1, BF16]),
    ("tied_views_cpu.pt", "S", [TO_CPU, TO_CUDA1, BF16]),        # views, offsets, strides, tied storages
    ("fp32_for_cast.pt", "S", [TO_CPU, BF16]),                   # every float dtype, specials
    ("torch-1/dataparallel_cuda1.pt", "C", [TO_CPU, MAP, BF16]),  # cuda:1, an nn.Parameter
    ("torch-1/legacy_cuda0.pt", "C", [TO_CPU, TO_CUDA1]),    # the pre-1.6 format
]

# (defect, input, command, what the judge's report must say): each must be caught
DEFECTS = [
    ("flip-bit", "tiny_mlp_cuda0.pt", TO_CPU, ": elements differ"),
    ("flip-bit", "fp32_for_cast.pt", BF16, ": elements differ from input.to(bfloat16)"),
    ("untie", "tied_views_cpu.pt", TO_CPU, "share a storage in the input but do not in the output"),
    ("untie", "torch-1/legacy_cuda0.pt", TO_CUDA1, "share a storage in the input but do not in the output"),
    ("contiguous", "tied_views_cpu.pt", TO_CPU, ": stride "),
    ("unparam", "torch-1/dataparallel_cuda1.pt", TO_CPU, ": parameter False, expected True"),
    ("drop", "tiny_mlp_cuda0.pt", TO_CUDA1, "missing in output"),
    ("truncate-cast", "fp32_for_cast.pt", BF16, ": elements differ from input.to(bfloat16)"),
    ("truncate-cast", "tied_views_cpu.pt", BF16, ": elements differ from input.to(bfloat16)"),
    ("keep-cuda", "tiny_mlp_cuda0.pt", TO_CPU, "saved device cuda:0, expected cpu"),
    ("keep-cuda", "torch-1/dataparallel_cuda1.pt", MAP, "saved device cuda:1, expected cuda:0"),
    ("keep-cuda", "tied_views_cpu.pt", TO_CUDA1, "storage locations in output pickle"),
]


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what, why=""):
        if ok:
            self.passed += 1
            print("ok   " + what)
        else:
            self.failed += 1
            print("FAIL %s%s" % (what, (": " + why) if why else ""))


@contextlib.contextmanager
def defect(name):
    old = os.environ.get(BUG)
    if name:
        os.environ[BUG] = name
    else:
        os.environ.pop(BUG, None)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(BUG, None)
        else:
            os.environ[BUG] = old


def reference(argv):
    """Run the reference tool in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = torch_verify._reference_tool(list(argv))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
        except Exception:  # noqa: BLE001 - a crash of the stand-in is an exit like any other
            traceback.print_exc(file=err)
            rc = 1
    return rc, out.getvalue(), err.getvalue()


def rewrite(path, args, out):
    if os.path.exists(out):
        os.remove(out)
    rc, _, err = reference(args + [path, "-o", out])
    if rc != 0 or not os.path.exists(out):
        raise RuntimeError("reference-tool %s exited %d: %s" % (" ".join(args), rc, err.strip()[-300:]))


def judge(path, out, kw):
    try:
        problems, _ = torch_verify.verify_output(path, out, **kw)
    except Exception as e:  # noqa: BLE001
        problems = ["judge error %s: %s" % (type(e).__name__, e)]
    return problems


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    samples, corpus, outdir = sys.argv[1:]
    os.makedirs(outdir, exist_ok=True)
    t = Tally()
    tv = "torch " + torch_verify.torch.__version__
    print("# judges self-test with %s (%s)" % (tv, sys.executable))
    paths = {name: corpus_file(corpus, name) if w == "C" else os.path.join(samples, name) for name, w, _ in INPUTS}
    missing = [p for p in paths.values() if not os.path.isfile(p)]
    if missing:
        print("FAIL: inputs missing: %s" % ", ".join(missing))
        return 1
    out = os.path.join(outdir, "out.pt")

    # 1. right outputs are accepted
    for name, _, commands in INPUTS:
        for label, args, kw in commands:
            what = "right output accepted: %s %s (%s)" % (label, name, tv)
            try:
                with defect(None):
                    rewrite(paths[name], args, out)
                problems = judge(paths[name], out, kw)
                t.check(not problems, what, "; ".join(problems[:5]))
            except Exception as e:  # noqa: BLE001
                t.check(False, what, str(e))

    # 2. wrong outputs are rejected
    for bug, name, (label, args, kw), says in DEFECTS:
        what = "defect %s caught: %s %s (%s)" % (bug, label, name, tv)
        try:
            with defect(bug):
                rewrite(paths[name], args, out)
            problems = judge(paths[name], out, kw)
            hit = [p for p in problems if says in p]
            t.check(bool(hit), what, "no problem says '%s'; the judge reported %s"
                    % (says, problems[:5] if problems else "nothing: it accepted the defective output"))
            if hit:
                print("     (%s)" % hit[0])
        except Exception as e:  # noqa: BLE001
            t.check(False, what, str(e))

    # 3. check_convert with the reference tool standing in for tensorctl
    check_convert.run = lambda cmd, timeout=600: reference(cmd[1:])
    ccdir = os.path.join(outdir, "cc")
    os.makedirs(ccdir, exist_ok=True)
    # (defect, input, the FAIL line a failing run must show; None: the run must pass)
    cases = [(None, paths["tiny_mlp_cuda0.pt"], None),
             ("flip-bit", paths["tiny_mlp_cuda0.pt"], ": elements differ"),
             (None, corpus_file(corpus, "torch-2/malicious.pt"), None)]
    for bug, path, must_show in cases:
        rep = check_convert.Report()
        with contextlib.redirect_stdout(io.StringIO()) as log, defect(bug):
            check_convert.check_file(["reference-tool"], ccdir, path, rep)
        fails = [l for l in log.getvalue().splitlines() if l.startswith("FAIL")]
        what = "check_convert %s a %s tool on %s" % ("fails" if must_show else "passes",
                                                     bug or "right", os.path.basename(path))
        if must_show:
            t.check(any(must_show in l for l in fails), what,
                    "no FAIL line says '%s' (%d passed): %s" % (must_show, rep.passed, " | ".join(fails)[:600]))
        else:
            t.check(rep.failed == 0 and rep.passed > 0, what,
                    "%d passed, %d failed: %s" % (rep.passed, rep.failed, " | ".join(fails)[:600]))

    # 4. nothing compared is a problem
    empty = os.path.join(outdir, "no_tensors.pt")
    torch_verify.torch.save({"epoch": 3, "note": "no tensor here"}, empty)
    problems = judge(empty, empty, {"device": "cpu"})
    t.check(any("nothing was compared" in p for p in problems), "a checkpoint with no tensor is rejected",
            "verify_output found %r" % problems)

    print("%d passed, %d failed" % (t.passed, t.failed))
    if t.passed + t.failed == 0:
        print("FAIL: no check ran")
        return 1
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
