#!/usr/bin/env python3
"""Run one command-line case of tests/cli/cases/ and judge it (after zstd's tests/cli-tests).

    run_case.py --tensorctl T --samples S --corpus C CASES_DIR/COMMAND/NAME.sh
    run_case.py --list CASES_DIR          COMMAND/NAME of every case, one a line (meson reads this
                                          at configure time and registers cli-COMMAND/NAME)
    run_case.py --update --tensorctl T [--samples S] [--corpus C] [PATH...]
                                          rewrite expected output from what T does now (below)

The cases live in one folder per command (cases/inspect/, cases/to-cpu/, ...); those of no one
command (help, version, the option parser, an unknown command) in cases/general/. A case file
directly in CASES_DIR is refused by --list, with the command that files it into its folder.

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

--update runs each case named (a NAME.sh, or a folder: every case below it; none: all of
cases/) and rewrites what it expects from what the binary does now, for a behaviour changed on
purpose. Review the result with `git diff` before committing: --update writes down whatever the
binary did. What it rewrites and what it leaves:
  - NAME.sh.exit and every .exact file: rewritten with the status and the output of this run.
  - a .glob file is left alone, always. A glob was written by hand to say which parts may vary
    (a size, a version, a timing); a program cannot know which they are. Where the glob still
    matches there is nothing to do; where it no longer matches --update prints the diff, leaves
    the file as it was and exits 1: edit that glob by hand.
  - a stream with no file is not judged and stays so, except for a new case (no .exit yet):
    it gets NAME.sh.stderr.exact, and NAME.sh.stdout.exact when it printed on stdout.
  - a case with NAME.sh.known-bug is left alone: what it expects is the right behaviour, not
    what tensorctl does now.
  - a case that skips (a reference corpus that is absent) or runs past the time limit is not
    updated (the timeout makes --update exit 1).
Exit 0 when every case named now passes as written, 1 when one still needs a hand edit.

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
REPO = os.path.dirname(os.path.dirname(HERE))
CASES = os.path.join(HERE, "cases")
TIMEOUT = 120
NAME = re.compile(r"[a-z0-9][a-z0-9-]*\Z")  # a folder's or a case's name, as meson test names take it


def list_cases(folder):
    """COMMAND/NAME of every case below folder, sorted; the problems (a case outside its folder)."""
    names, problems = [], []
    folders = [e for e in os.listdir(folder) if os.path.isdir(os.path.join(folder, e))]
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        if entry.endswith(".sh") and os.path.isfile(path):
            case = entry[:-3]
            cmd = max((f for f in folders if case.startswith(f + "-")), key=len, default=None)
            dest = "%s/%s" % (cmd, case[len(cmd) + 1:]) if cmd else "COMMAND/NEWNAME"
            problems.append("%s is not in a command's folder: file it with\n    for f in %s/%s.sh*; do git mv \"$f\" "
                            "\"%s/%s${f#%s/%s}\"; done" % (entry, folder, case, folder, dest, folder, case))
        elif os.path.isdir(path):
            for n in sorted(os.listdir(path)):
                if n.endswith(".sh"):
                    if NAME.match(entry) and NAME.match(n[:-3]):
                        names.append(entry + "/" + n[:-3])
                    else:
                        problems.append("%s/%s: a case's folder and name are lower-case letters, digits and '-'"
                                        % (entry, n))
    if not names and not problems:
        problems.append("no cases (COMMAND/*.sh) in %s" % folder)
    return names, problems


def cli_list(folder):
    names, problems = list_cases(folder)
    for pr in problems:
        print("run_case: " + pr, file=sys.stderr)
    if problems:
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


def expected_files(case, stream):
    """NAME.sh.STREAM.exact and .glob: (exact or None, glob or None)."""
    exact, glob = case + "." + stream + ".exact", case + "." + stream + ".glob"
    return (exact if os.path.exists(exact) else None), (glob if os.path.exists(glob) else None)


def check_stream(case, stream, got, problems):
    """Compare one stream with NAME.sh.STREAM.exact or .glob. Returns False when neither exists."""
    exact, glob = expected_files(case, stream)
    if exact and glob:
        problems.append("both %s and %s exist: keep one" % (os.path.basename(exact), os.path.basename(glob)))
        return True
    if exact:
        want = read(exact)
        if got != want:
            problems.append("%s differs from %s:\n%s" % (stream, os.path.basename(exact), diff(want, got, stream)))
        return True
    if glob:
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


def needs_corpus(body, corpus):
    return re.search(r"\$\{?C\b", body) is not None and not os.path.isdir(corpus)


def corpus_skip(name, corpus):
    return ("SKIP %s: the reference corpus %s is not there (extra coverage: a clone has none; cases on the "
            "repository's own files use $S/corpus)" % (name, corpus))


def execute(a, case, body):
    """Run the case in a fresh folder: (status or "timeout", stdout, stderr), paths as placeholders."""
    tool, samples, corpus = (os.path.abspath(p) for p in (a.tensorctl, a.samples, a.corpus))
    work = tempfile.mkdtemp(prefix="cli-case-")
    try:
        env = dict(os.environ, T=tool, S=samples, C=corpus, W=work, PY=sys.executable, H=HERE,
                   LC_ALL="C", LANG="C")
        try:
            p = subprocess.run(["sh", "-eu", "-c", '. "$H/case_lib.sh"; . "$1"', os.path.basename(case), case],
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
    return status, out, err


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
    if needs_corpus(body, os.path.abspath(a.corpus)):
        print(corpus_skip(name, os.path.abspath(a.corpus)))
        return 77
    if not os.access(a.tensorctl, os.X_OK):
        print("FAIL %s: no tensorctl binary at %s" % (name, os.path.abspath(a.tensorctl)))
        return 1
    status, out, err = execute(a, case, body)

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


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def update_stream(case, stream, got, new_case, written, problems):
    """Rewrite NAME.sh.STREAM.exact from got; judge a .glob without touching it (see the module's doc)."""
    exact, glob = expected_files(case, stream)
    if exact and glob:
        problems.append("both %s and %s exist: keep one" % (os.path.basename(exact), os.path.basename(glob)))
    elif glob:
        check_stream(case, stream, got, problems)  # left alone: a mismatch is for a hand edit
    elif exact or (new_case and (stream == "stderr" or got)):
        path = exact or case + "." + stream + ".exact"
        if not exact or read(path) != got:
            write(path, got)
            written.append(os.path.basename(path))


def update_case(a, case):
    """--update of one case: 0 when it now passes as written, 1 when a hand edit is still needed."""
    name = os.path.relpath(case, CASES) if case.startswith(CASES + os.sep) else case
    if os.path.exists(case + ".known-bug"):
        print("kept    %s: %s states the right behaviour, not what tensorctl does" % (name,
              os.path.basename(case) + ".known-bug"))
        return 0
    body = read(case)
    if needs_corpus(body, os.path.abspath(a.corpus)):
        print("kept    " + corpus_skip(name, os.path.abspath(a.corpus))[5:])
        return 0
    status, out, err = execute(a, case, body)
    if status == "timeout":
        print("FAIL    %s: no answer in %d s, nothing updated" % (name, TIMEOUT))
        return 1
    new_case = not os.path.exists(case + ".exit")
    written, problems = [], []
    if new_case or read(case + ".exit").strip() != str(status):
        write(case + ".exit", "%d\n" % status)
        written.append(os.path.basename(case) + ".exit")
    update_stream(case, "stderr", err, new_case, written, problems)
    update_stream(case, "stdout", out, new_case, written, problems)
    if problems:
        print("FAIL    %s: edit by hand%s" % (name, (" (rewritten: %s)" % ", ".join(written)) if written else ""))
        for pr in problems:
            print("  " + pr.rstrip("\n").replace("\n", "\n  "))
        return 1
    print(("updated %s: %s" % (name, ", ".join(written))) if written else "ok      %s" % name)
    return 0


def cases_below(path):
    """The case scripts a --update argument names: NAME.sh (or NAME), or every NAME.sh below a folder."""
    if os.path.isdir(path):
        return sorted(os.path.join(d, n) for d, _, ns in os.walk(path) for n in ns if n.endswith(".sh"))
    if not path.endswith(".sh"):
        path += ".sh"
    if not os.path.isfile(path):
        raise FileNotFoundError("run_case: no case %s" % path)
    return [path]


def cli_update(a):
    if not os.access(a.tensorctl, os.X_OK):
        print("run_case: no tensorctl binary at %s" % os.path.abspath(a.tensorctl), file=sys.stderr)
        return 2
    try:
        cases = [os.path.abspath(c) for p in (a.paths or [CASES]) for c in cases_below(p)]
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    if not cases:
        print("run_case: no cases (*.sh) in %s" % " ".join(a.paths), file=sys.stderr)
        return 2
    failed = sum(update_case(a, c) for c in cases)
    print("%d cases, %d need a hand edit" % (len(cases), failed))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", metavar="CASES_DIR")
    ap.add_argument("--update", action="store_true", help="rewrite expected output (see the module's doc)")
    ap.add_argument("--tensorctl")
    ap.add_argument("--samples", default=os.path.join(REPO, "sample_models"))
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(REPO), "shared", "corpus"))
    ap.add_argument("paths", nargs="*", metavar="CASE", help="one case (judged); with --update cases and folders")
    a = ap.parse_args()
    if a.list:
        return cli_list(a.list)
    if not a.tensorctl:
        ap.print_usage(sys.stderr)
        return 2
    if a.update:
        return cli_update(a)
    if len(a.paths) != 1:
        ap.print_usage(sys.stderr)
        return 2
    a.case = a.paths[0]
    return run_case(a)


if __name__ == "__main__":
    sys.exit(main())
