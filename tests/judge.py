"""What the judge scripts of tests/ share: one line a check, the count, and the exit status.

    from judge import Report, compare_names, corpus_file, run, torch_or_skip
    torch = torch_or_skip()                      # a judge that needs torch: exit 77 (skip) without
    out = out_dir(base, torch)                   # a fresh folder for this torch's outputs
    open_in(pid, folder)                         # the files a process holds open in folder
    rep = Report()
    rc, out, err = run(tool, "inspect", path)    # tool: a program, or an argument list
    rep.check("inspect exits 0", ["exit %d: %s" % (rc, err.strip())] if rc else [])
    problems, both = compare_names(got, want)    # names in one map and not the other
    path = corpus_file(corpus, "torch-2/lm_cpu.pt")  # in the one torch-2.* folder of a corpus
    sys.exit(rep.finish())

A check passes when its list of problems is empty: `PASS what`; otherwise `FAIL what` and its
first problems, one a line. finish() prints `N passed, N failed` and gives the exit status: 1 when
a check failed or none passed (a run that checked nothing is a failure, never a pass), else 0.
Nothing here needs torch: the judges that run without it use this too.
"""

import glob
import os
import re
import shutil
import subprocess
import sys


class Report:
    """The tally of one judge run."""

    def __init__(self, shown=12):
        self.passed = self.failed = 0
        self.shown = shown  # problems printed under a FAIL line; the rest are counted

    def check(self, what, problems):
        """One check: PASS when problems is empty, else FAIL and the problems. True when it passed."""
        problems = [str(p) for p in problems]
        if not problems:
            self.passed += 1
            print("PASS %s" % what)
            return True
        self.failed += 1
        print("FAIL %s" % what)
        for p in problems[:self.shown]:
            print("    " + p)
        if len(problems) > self.shown:
            print("    ... %d more" % (len(problems) - self.shown))
        return False

    def finish(self):
        """Print the count; the exit status: 1 on any failure or when no check passed, else 0."""
        print("%d passed, %d failed" % (self.passed, self.failed))
        if self.passed + self.failed == 0:
            print("FAIL: no check ran")
        return 1 if self.failed or not self.passed else 0


def out_dir(base, torch=None):
    """base, or with torch base/torch-VERSION (a folder for each interpreter run_with_torch.sh
    runs the judge under), emptied: made anew."""
    out = base if torch is None else os.path.join(base, "torch-" + re.sub(r"[^0-9A-Za-z.]", "_", torch.__version__))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    return out


def torch_or_skip():
    """The torch module, or exit 77 when it cannot be imported."""
    try:
        import torch
    except ImportError:
        print("SKIP: torch cannot be imported")
        sys.exit(77)
    return torch


def run(cmd, *args, **kwargs):
    """Run cmd (a program, or an argument list) with args; (exit status, stdout, stderr), decoded
    as UTF-8 with any undecodable byte replaced. kwargs go to subprocess.run."""
    argv = [cmd] if isinstance(cmd, str) else list(cmd)
    p = subprocess.run(argv + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def open_in(pid, folder):
    """The files process pid holds open in folder, as /proc shows them (an output not yet named,
    made with O_TMPFILE, shows as 'FOLDER/#NNN (deleted)'): how a test catches a rewrite midway."""
    fds, found = "/proc/%d/fd" % pid, []
    try:
        for fd in os.listdir(fds):
            try:
                t = os.readlink(os.path.join(fds, fd))
            except OSError:
                continue
            if t.startswith(folder + "/"):
                found.append(os.path.join(fds, fd))
    except OSError:
        pass
    return found


def compare_names(got, want):
    """(problems, names in both, sorted): a problem for each name of got that want lacks
    ('unexpected tensor N') and each of want that got lacks ('missing tensor N')."""
    problems = ["unexpected tensor %s" % n for n in sorted(set(got) - set(want))]
    problems += ["missing tensor %s" % n for n in sorted(set(want) - set(got))]
    return problems, sorted(set(want) & set(got))


def corpus_file(corpus, rel):
    """rel ('torch-2/NAME', 'torch-1/NAME') in corpus (sample_models/corpus or the reference corpus,
    laid out alike): NAME in its one folder of files that torch 2.x (1.x) wrote, torch-2.15/ in
    sample_models/corpus and torch-2.14/ in the reference corpus. The path as if that folder were
    torch-2.x/ when there is none, so that the caller's missing-file message names what it wanted."""
    series, _, name = rel.partition("/")
    found = sorted(glob.glob(os.path.join(corpus, series + ".*")))
    return os.path.join(found[-1] if found else os.path.join(corpus, series + ".x"), name)
