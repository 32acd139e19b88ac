#!/usr/bin/env python3
"""The case runner judged on copies of real cases in a temporary folder:

    test_run_case.py TENSORCTL

- a case whose .exit and .stderr.exact are wrong fails; --update on it rewrites both back to what
  the binary does (byte for byte what the repository holds) and the rerun passes;
- --update of a folder fixes every case below it;
- a .glob that no longer matches is left as it was and --update exits 1; one that matches is left
  alone and --update exits 0;
- a new case (NAME.sh alone) gets its .exit, .stderr.exact and .stdout.exact, and then passes;
- a case with .known-bug is never rewritten;
- --list names COMMAND/NAME and refuses a case outside a command's folder, with the git mv that
  files it (into the folder its name starts with).
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from judge import Report  # noqa: E402

RUNNER = os.path.join(HERE, "run_case.py")
CASES = os.path.join(HERE, "cases")
# Cases on nothing but the binary (no sample), quick: one with stdout.exact, one with stdout.glob.
EXACT = "general/unknown-command-is-a-usage-error"
GLOB = "general/version-short-option-and-help"
OTHER = "general/unknown-option-is-one-line"


def runner(tool, *args):
    p = subprocess.run([sys.executable, RUNNER, "--tensorctl", tool] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    return p.returncode, p.stdout


def judge(tool, case):
    return runner(tool, case + ".sh")


def copy_case(src_name, dst_dir, dst_name=None):
    """Copy every file of one case of cases/ into dst_dir; the copy's path without .sh."""
    os.makedirs(dst_dir, exist_ok=True)
    base = os.path.basename(src_name)
    dst = os.path.join(dst_dir, dst_name or base)
    folder = os.path.join(CASES, os.path.dirname(src_name))
    for n in os.listdir(folder):
        if n == base + ".sh" or n.startswith(base + ".sh."):
            shutil.copyfile(os.path.join(folder, n), dst + n[len(base):])
    return dst


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tool = os.path.abspath(sys.argv[1])
    rep = Report()
    top = tempfile.mkdtemp(prefix="run-case-test-")
    try:
        cases = os.path.join(top, "cases")
        # A wrong expectation fails; --update puts back what the repository has; the rerun passes.
        c = copy_case(EXACT, os.path.join(cases, "general"))
        rc, out = judge(tool, c)
        rep.check("the copy of %s passes as it is" % EXACT, [] if rc == 0 else ["exit %d:" % rc, out])
        want = {s: read(c + s) for s in (".sh.exit", ".sh.stderr.exact", ".sh.stdout.exact")}
        write(c + ".sh.exit", "0\n")
        write(c + ".sh.stderr.exact", "not what tensorctl says\n")
        rc, out = judge(tool, c)
        rep.check("a wrong .exit and .stderr.exact fail the case",
                  [] if rc == 1 and "exit status 2, expected 0" in out and "stderr differs" in out
                  else ["exit %d:" % rc, out])
        rc, out = runner(tool, "--update", c + ".sh")
        rep.check("--update of that case exits 0 and names what it rewrote",
                  [] if rc == 0 and "unknown-command-is-a-usage-error.sh.exit" in out
                  and "unknown-command-is-a-usage-error.sh.stderr.exact" in out
                  and ".stdout.exact" not in out else ["exit %d:" % rc, out])
        rep.check("--update wrote back, byte for byte, the expectation the repository holds",
                  ["%s differs" % s for s in want if read(c + s) != want[s]])
        rc, out = judge(tool, c)
        rep.check("the rerun passes", [] if rc == 0 else ["exit %d:" % rc, out])
        rc, out = runner(tool, "--update", c)  # the name without .sh is the case too
        rep.check("--update of a case already right changes nothing",
                  ([] if rc == 0 and "ok " in out else ["exit %d:" % rc, out])
                  + ["%s changed" % s for s in want if read(c + s) != want[s]])

        # A folder: every case below it.
        d = os.path.join(top, "folder")
        pair = [copy_case(EXACT, os.path.join(d, "general")), copy_case(OTHER, os.path.join(d, "general"))]
        for p in pair:
            write(p + ".sh.stderr.exact", "wrong\n")
        rc1 = [judge(tool, p)[0] for p in pair]
        rc, out = runner(tool, "--update", d)
        rc2 = [judge(tool, p) for p in pair]
        rep.check("--update of a folder fixes each case below it",
                  ([] if rc1 == [1, 1] else ["before: %s" % rc1]) + ([] if rc == 0 else ["exit %d:" % rc, out])
                  + ["after: exit %d: %s" % r for r in rc2 if r[0] != 0])

        # A glob is never rewritten: where it no longer matches, --update says so and exits 1.
        g = copy_case(GLOB, os.path.join(cases, "general"))
        glob = read(g + ".sh.stdout.glob")
        write(g + ".sh.stdout.glob", "tensorctl 0.0-*\n...\n")
        rc, out = runner(tool, "--update", g + ".sh")
        rep.check("a glob that no longer matches: --update exits 1, shows the diff and leaves the file",
                  ([] if rc == 1 and "does not match" in out and "edit by hand" in out else ["exit %d:" % rc, out])
                  + ([] if read(g + ".sh.stdout.glob") == "tensorctl 0.0-*\n...\n" else ["the glob was rewritten"]))
        write(g + ".sh.stdout.glob", glob)
        rc, out = runner(tool, "--update", g + ".sh")
        rep.check("a glob that matches: --update exits 0 and leaves it",
                  ([] if rc == 0 else ["exit %d:" % rc, out])
                  + ([] if read(g + ".sh.stdout.glob") == glob else ["the glob was rewritten"]))

        # A new case: the script alone gets its expected files, and then passes.
        n = os.path.join(cases, "general", "new-case")
        write(n + ".sh", '"$T" --version\n"$T" frobnicate\n')
        rc, out = runner(tool, "--update", n + ".sh")
        made = sorted(x for x in os.listdir(os.path.dirname(n)) if x.startswith("new-case.sh."))
        rep.check("a new case gets .exit, .stderr.exact and .stdout.exact (it printed the version)",
                  ([] if rc == 0 else ["exit %d:" % rc, out])
                  + ([] if made == ["new-case.sh.exit", "new-case.sh.stderr.exact", "new-case.sh.stdout.exact"]
                     else ["made %s" % made]))
        rep.check("the new case's .exit, stderr and stdout are what the binary gave",
                  [] if os.path.exists(n + ".sh.exit") and read(n + ".sh.exit") == "2\n"
                  and read(n + ".sh.stderr.exact") == want[".sh.stderr.exact"]
                  and read(n + ".sh.stdout.exact").startswith("tensorctl ")
                  else ["exit file %r" % (read(n + ".sh.exit") if os.path.exists(n + ".sh.exit") else None)])
        rc, out = judge(tool, n)
        rep.check("the new case passes", [] if rc == 0 else ["exit %d:" % rc, out])

        # A known bug states the right behaviour: never rewritten.
        k = copy_case(EXACT, os.path.join(cases, "general"), "known")
        write(k + ".sh.exit", "0\n")
        write(k + ".sh.known-bug", "(a stand-in bug for the runner's test)\n")
        rc, out = runner(tool, "--update", k + ".sh")
        rep.check("a case with .known-bug is left alone",
                  ([] if rc == 0 and "kept" in out else ["exit %d:" % rc, out])
                  + ([] if read(k + ".sh.exit") == "0\n" else ["its .exit was rewritten"]))

        # --list: COMMAND/NAME, and a case outside a command's folder is refused with its move.
        p = subprocess.run([sys.executable, RUNNER, "--list", cases], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        rep.check("--list names COMMAND/NAME",
                  [] if p.returncode == 0 and p.stdout.split() == ["general/known", "general/new-case",
                                                                   "general/unknown-command-is-a-usage-error",
                                                                   "general/version-short-option-and-help"]
                  else ["exit %d: %s %s" % (p.returncode, p.stdout, p.stderr)])
        shutil.copyfile(n + ".sh", os.path.join(cases, "general-flat.sh"))
        p = subprocess.run([sys.executable, RUNNER, "--list", cases], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        rep.check("--list refuses a case outside a command's folder and says how to file it",
                  [] if p.returncode == 1 and "general-flat.sh is not in a command's folder" in p.stderr
                  and "git mv" in p.stderr and "general/flat${f#" in p.stderr
                  else ["exit %d: %s" % (p.returncode, p.stderr)])
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
