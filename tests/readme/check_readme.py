#!/usr/bin/env python3
"""The README's walkthrough runs as written: every ```sh block after a line `<!-- walkthrough -->`,
in order, in one bash (the state of one block, its folder and files, carries to the next), from a
copy of the checkout's samples beside a build/tensorctl that is the binary under test.

    check_readme.py --tensorctl T --readme README.md --samples sample_models --out DIR

Each command line must exit 0, or with one of the statuses its comment names after the word
"exit" ("# ... exit 0 equal, 1 different": 0 or 1); lines that are only a comment are skipped.
The shell has pipefail set, so a pipeline's status is its first failing command's. A line that
writes into the samples (beside its input) fails too: the walkthrough writes into its scratch
folder only. One PASS/FAIL line per command, then the count. Exit 1 on any failure or when no
command ran; 77 (skip) when a tool the walkthrough uses (bash, jq, GNU parallel) is missing,
naming it (./setup.sh installs them).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import Report  # noqa: E402

MARK = "<!-- walkthrough -->"
TOOLS = {"bash": "bash", "jq": "jq", "parallel": "parallel"}  # command: Debian package


def commands(readme):
    """[(line number, command, allowed exit statuses)] of the marked blocks."""
    out = []
    lines = open(readme, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() != MARK:
            i += 1
            continue
        i += 1
        if i >= len(lines) or lines[i].strip() != "```sh":
            raise SystemExit("FAIL README.md:%d: %s is not followed by a ```sh block" % (i, MARK))
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            text = lines[i].strip()
            if text and not text.startswith("#"):
                m = re.search(r"\s#\s", lines[i])
                comment = lines[i][m.end():] if m else ""
                allowed = {0}
                if "exit" in comment:
                    allowed = {int(n) for n in re.findall(r"\b(\d)\b", comment[comment.index("exit"):])} or {0}
                out.append((i + 1, lines[i][:m.start()].rstrip() if m else lines[i], allowed))
            i += 1
        i += 1
    return out


def tree(d):
    return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    for o in ("--tensorctl", "--readme", "--samples", "--out"):
        ap.add_argument(o, required=True)
    a = ap.parse_args()
    missing = ["%s (apt-get install %s)" % (c, p) for c, p in TOOLS.items() if not shutil.which(c)]
    if missing:
        print("SKIP: the README's walkthrough uses %s; ./setup.sh installs them" % ", ".join(missing))
        return 77
    cmds = commands(a.readme)
    rep = Report()
    if not cmds:
        rep.check("the README has walkthrough blocks", ["no %s block found in %s" % (MARK, a.readme)])
        return rep.finish()

    # the checkout as the walkthrough sees it: build/tensorctl and sample_models/
    shutil.rmtree(a.out, ignore_errors=True)
    root, res, tmp = (os.path.join(a.out, n) for n in ("checkout", "results", "tmp"))
    for d in (root, res, tmp):
        os.makedirs(d)
    os.makedirs(os.path.join(root, "build"))
    os.symlink(os.path.abspath(a.tensorctl), os.path.join(root, "build", "tensorctl"))
    shutil.copytree(a.samples, os.path.join(root, "sample_models"), symlinks=True)
    before = tree(os.path.join(root, "sample_models"))

    script = ["set -o pipefail"]
    for n, cmd, _ in cmds:
        script.append('{ %s\n} >"$WALK_RESULTS/%d.out" 2>"$WALK_RESULTS/%d.err" </dev/null; echo $? >"$WALK_RESULTS/%d.rc"'
                      % (cmd, n, n, n))
    env = dict(os.environ, WALK_RESULTS=res, TMPDIR=tmp, LC_ALL="C")
    p = subprocess.run(["bash", "-c", "\n".join(script)], cwd=root, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=600)
    if p.returncode:
        print(p.stdout.decode(errors="replace"))
    for n, cmd, allowed in cmds:
        what = "README.md:%d: %s" % (n, cmd)
        rcf = os.path.join(res, "%d.rc" % n)
        if not os.path.exists(rcf):
            rep.check(what, ["did not run (the shell stopped before it)"])
            continue
        rc = int(open(rcf).read())
        err = open(os.path.join(res, "%d.err" % n), errors="replace").read().strip().splitlines()
        rep.check("%s (exit %d)" % (what, rc),
                  [] if rc in allowed else ["exit %d, expected %s; stderr: %s"
                                            % (rc, " or ".join(map(str, sorted(allowed))), " | ".join(err[-3:]))])
    after = tree(os.path.join(root, "sample_models"))
    rep.check("the walkthrough leaves sample_models/ as it was",
              ["new in sample_models/: %s" % f for f in sorted(set(after) - set(before))]
              + ["gone from sample_models/: %s" % f for f in sorted(set(before) - set(after))])
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
