#!/usr/bin/env python3
"""Run one command-line case of tests/cli/cases/ and judge it (after zstd's tests/cli-tests).

    run_case.py --tensorctl T --samples S --corpus C CASES_DIR/NAME.sh
    run_case.py --list CASES_DIR          case names, one a line (meson reads this at configure time)

A case is a small POSIX sh script. It runs as `sh -eu` in a fresh empty folder $W (removed
afterwards), after case_lib.sh (fail, absent, unchanged, no_temporaries, bin_set) is sourced, with:
    $T  the tensorctl binary      $S  sample_models/      $C  the reference corpus (../shared/corpus)
    $W  the case's own folder     $PY this Python         $H  tests/cli/ (helpers)
Setup steps stop the case when they fail (set -e), so their exit status and stderr -- never what
a case expects -- show up in the diff. The case's checked command is its last one; a case that
checks files afterwards keeps the command's status (`rc=0; "$T" ... || rc=$?; ...; exit "$rc"`).

Beside NAME.sh:
    NAME.sh.exit            the expected exit status of the script (required)
    NAME.sh.stderr.exact    the expected stderr, byte for byte    } exactly one
    NAME.sh.stderr.glob     the expected stderr as a glob          } of the two
    NAME.sh.stdout.exact / NAME.sh.stdout.glob                     optional
    NAME.sh.known-bug       optional: what tensorctl gets wrong; the case states the right
                            behaviour and meson registers it should_fail until the bug is fixed
Before comparing, the paths of $W, $S and $C in the output are replaced by the text `$W`, `$S`
and `$C`, so exact files stay exact. A glob is matched line by line: a line `...` matches any
number of lines (none included), `*` matches any run of characters within a line, every other
character stands for itself. A glob that is nothing but `...` and `*` checks nothing and is
refused, as is a case without its .exit or stderr file.

The files of sample_models/ (its corpus/ among them) are in every clone. The reference corpus is
extra coverage, beside the checkout or not: a case that names $C skips (77) where it is absent.

Exit 0 when the case behaved as expected, 1 (with a diff) when not, 2 on bad usage, 77 (skipped)
for a case over a missing reference corpus.
"""

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 120


def list_cases(folder):
    names = sorted(n[:-3] for n in os.listdir(folder) if n.endswith(".sh"))
    if not names:
        print("run_case: no cases (*.sh) in %s" % folder, file=sys.stderr)
        return 1
    print("\n".join(names))
    return 0


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def glob_regex(line):
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", line)) + r"\Z",
                      re.S)


def glob_match(pattern_lines, lines):
    """True when lines match pattern_lines (see the module's doc)."""
    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(pattern_lines):
            ok = j == len(lines)
        elif pattern_lines[i] == "...":
            ok = any(match(i + 1, k) for k in range(j, len(lines) + 1))
        else:
            ok = j < len(lines) and glob_regex(pattern_lines[i]).match(lines[j]) is not None and match(i + 1, j + 1)
        memo[(i, j)] = ok
        return ok

    return match(0, 0)


def vacuous_glob(text):
    return all(line == "..." or set(line) <= {"*"} for line in text.splitlines()) and text.strip() != ""


def diff(want, got, label):
    lines = difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                 "expected " + label, "actual " + label)
    return "".join(l if l.endswith("\n") else l + "\n\\ no newline at end\n" for l in lines)


def check_stream(case, stream, got, problems):
    """Compare one stream with NAME.sh.STREAM.exact or .glob. Returns False when neither exists."""
    exact, glob = case + "." + stream + ".exact", case + "." + stream + ".glob"
    if os.path.exists(exact) and os.path.exists(glob):
        problems.append("both %s and %s exist: keep one" % (os.path.basename(exact), os.path.basename(glob)))
        return True
    if os.path.exists(exact):
        want = read(exact)
        if got != want:
            problems.append("%s differs from %s:\n%s" % (stream, os.path.basename(exact), diff(want, got, stream)))
        return True
    if os.path.exists(glob):
        want = read(glob)
        if vacuous_glob(want):
            problems.append("%s checks nothing (only '...' and '*')" % os.path.basename(glob))
        elif not glob_match(want.splitlines(), got.splitlines()):
            problems.append("%s does not match %s:\n%s" % (stream, os.path.basename(glob), diff(want, got, stream)))
        return True
    return False


def placeholders(text, paths):
    """Replace each path (longest first) by its placeholder name."""
    for path, name in sorted(paths, key=lambda p: -len(p[0])):
        text = text.replace(path, name)
    return text


def run_case(a):
    case = os.path.abspath(a.case)
    name = os.path.basename(case)
    problems = []
    if not os.path.exists(case + ".exit"):
        problems.append("%s.exit is missing: a case must say which exit status it expects" % name)
    if not (os.path.exists(case + ".stderr.exact") or os.path.exists(case + ".stderr.glob")):
        problems.append("%s.stderr.exact or %s.stderr.glob is missing: a case must say what it prints on stderr"
                        % (name, name))
    if problems:
        print("FAIL %s: %s" % (name, "; ".join(problems)))
        return 1
    want_exit = read(case + ".exit").strip()
    if not re.fullmatch(r"\d+", want_exit):
        print("FAIL %s: %s.exit holds %r, not an exit status" % (name, name, want_exit))
        return 1
    body = read(case)
    tool, samples, corpus = (os.path.abspath(p) for p in (a.tensorctl, a.samples, a.corpus))
    if re.search(r"\$\{?C\b", body) and not os.path.isdir(corpus):
        print("SKIP %s: the reference corpus %s is not there (extra coverage: a clone has none; cases on the "
              "repository's own files use $S/corpus)" % (name, corpus))
        return 77
    if not os.access(tool, os.X_OK):
        print("FAIL %s: no tensorctl binary at %s" % (name, tool))
        return 1

    work = tempfile.mkdtemp(prefix="cli-case-")
    try:
        env = dict(os.environ, T=tool, S=samples, C=corpus, W=work, PY=sys.executable, H=HERE,
                   LC_ALL="C", LANG="C")
        try:
            p = subprocess.run(["sh", "-eu", "-c", '. "$H/case_lib.sh"; . "$1"', name, case],
                               cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=TIMEOUT)
            status, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            status, out, err = "timeout", e.stdout or b"", e.stderr or b""
    finally:
        shutil.rmtree(work, ignore_errors=True)

    paths = []
    for path, ph in ((work, "$W"), (samples, "$S"), (corpus, "$C")):
        paths.append((path, ph))
        if os.path.realpath(path) != path:
            paths.append((os.path.realpath(path), ph))
    out = placeholders(out.decode("utf-8", "replace"), paths)
    err = placeholders(err.decode("utf-8", "replace"), paths)

    if status == "timeout":
        problems.append("no answer in %d s" % TIMEOUT)
    elif str(status) != want_exit:
        problems.append("exit status %s, expected %s%s" % (status, want_exit,
                                                          " (killed by signal %d)" % -status if status < 0 else ""))
    check_stream(case, "stderr", err, problems)
    check_stream(case, "stdout", out, problems)
    known_bug = case + ".known-bug"

    print("case %s: exit %s" % (name, status))
    if problems:
        print("FAIL %s" % name)
        for pr in problems:
            print("  " + pr.rstrip("\n").replace("\n", "\n  "))
        print("--- the case ---")
        print(body.rstrip("\n"))
        if not any(pr.startswith("stderr ") for pr in problems):
            print("--- its stderr (as expected) ---")
            print(err.rstrip("\n"))
        if os.path.exists(known_bug):
            print("--- known tensorctl bug (%s) ---" % os.path.basename(known_bug))
            print(read(known_bug).rstrip("\n"))
        return 1
    print("ok   %s" % name)
    if os.path.exists(known_bug):
        print("the known bug of %s looks fixed: delete that file" % os.path.basename(known_bug))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", metavar="CASES_DIR")
    ap.add_argument("--tensorctl")
    ap.add_argument("--samples")
    ap.add_argument("--corpus")
    ap.add_argument("case", nargs="?")
    a = ap.parse_args()
    if a.list:
        return list_cases(a.list)
    if not (a.tensorctl and a.samples and a.corpus and a.case):
        ap.print_usage(sys.stderr)
        return 2
    return run_case(a)


if __name__ == "__main__":
    sys.exit(main())
