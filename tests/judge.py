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

A judge of several features (meson registers one test per feature, so that a failure names it):
    only, argv = features(sys.argv[1:], ["shards", "memory"])   # --only F[,F...]; --features lists
    v = once_per_run(folder, "probe", lambda: probe(py))        # set-up shared by the run's tests
    tree = folder_once_per_run(folder, "tree", make)            # a folder make(path) fills, once

A check passes when its list of problems is empty: `PASS what`; otherwise `FAIL what` and its
first problems, one a line. finish() prints `N passed, N failed` and gives the exit status: 1 when
a check failed or none passed (a run that checked nothing is a failure, never a pass), else 0.
Nothing here needs torch: the judges that run without it use this too.
"""

import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time


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


def features(argv, names):
    """A judge's features to run and argv without its `--only F[,F...]` (all of names when absent,
    in their order). `--features` prints the names, one a line, and exits 0: meson registers one
    test per name at configure time, so that a failing test names its feature. An unknown name is
    a usage error (exit 2)."""
    argv, only = list(argv), None
    if argv[:1] == ["--features"]:
        print("\n".join(names))
        sys.exit(0)
    if "--only" in argv:
        i = argv.index("--only")
        if i + 1 >= len(argv):
            print("--only needs a feature: %s" % ", ".join(names), file=sys.stderr)
            sys.exit(2)
        only = argv[i + 1].split(",")
        del argv[i:i + 2]
        unknown = [f for f in only if f not in names]
        if unknown:
            print("unknown feature %s (the features: %s)" % (", ".join(unknown), ", ".join(names)), file=sys.stderr)
            sys.exit(2)
    return [n for n in names if only is None or n in only], argv


def _run_id():
    """Who started this judge, as 'PID START' of the nearest ancestor that is not sh (a judge runs
    under sh wrappers such as run_with_torch.sh): the `meson test` that runs the tests of every
    feature. None for a run by hand (an interactive shell started it) or where /proc cannot say:
    nothing is kept then."""
    pid = os.getppid()
    try:
        for _ in range(8):
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read()
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if comm in ("bash", "zsh", "fish", "ksh", "tcsh", "csh") or rest[1] in ("0", "1"):
                return None
            if comm not in ("sh", "dash"):
                return "%d %s" % (pid, rest[19])
            pid = int(rest[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


RUN_CACHE_AGE = 3 * 3600  # seconds: longer than a whole `meson test`; a guard against a reused pid


def once_per_run(folder, name, compute):
    """compute()'s result (JSON), computed once for the tests of one `meson test` and kept in
    folder/NAME.json for the others: set-up that every feature of a judge needs (which interpreters
    import torch, say) costs what it cost before the judge was split. Another run (another parent
    process), or the same one after RUN_CACHE_AGE, computes it anew; so does a run whose parent
    /proc cannot name (a run by hand). Tests running at once may both compute it: the file is
    replaced whole."""
    key, path = _run_id(), os.path.join(folder, name + ".json")
    if key is not None:
        try:
            with open(path) as f:
                kept = json.load(f)
            if kept.get("run") == key and time.time() - kept.get("time", 0) < RUN_CACHE_AGE:
                return kept["value"]
        except (OSError, ValueError, AttributeError):
            pass
    value = compute()
    if key is not None:
        os.makedirs(folder, exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "w") as f:
            json.dump({"run": key, "time": time.time(), "value": value}, f)
        os.replace(tmp, path)
    return value


def _alive(pid, start):
    """Whether process pid, started at start (/proc/PID/stat's start time), still runs."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2:].split()[19] == start
    except (OSError, ValueError, IndexError):
        return False


def folder_once_per_run(folder, name, make):
    """folder/NAME.run-PID-START, filled by make(path) once for the tests of one `meson test` (the
    run once_per_run names): an expensive input that several features judge (a tree made by
    torch, numpy, joblib, ...) is made once, not once a feature. The tests that want it while it
    is being made wait for it (a lock on folder/NAME.lock) instead of making it again; the judges
    only read it. A run by hand gets a folder of its own process. The folders of runs that have
    ended are removed, never one of a run still going. make's exception propagates and leaves
    nothing behind; the next caller tries anew."""
    key = _run_id()
    if key is None:
        with open("/proc/self/stat") as f:
            stat = f.read()
        key = "%d %s" % (os.getpid(), stat[stat.rindex(")") + 2:].split()[19])
    path = os.path.join(folder, "%s.run-%s" % (name, key.replace(" ", "-")))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for old in glob.glob(os.path.join(folder, name + ".run-*")):
            tag = old[len(os.path.join(folder, name + ".run-")):].split("-")
            if len(tag) >= 2 and not _alive(tag[0], tag[1].split(".")[0]):
                shutil.rmtree(old, ignore_errors=True)
        if os.path.isdir(path):
            return path
        tmp = path + ".new"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            make(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        os.rename(tmp, path)
        return path
