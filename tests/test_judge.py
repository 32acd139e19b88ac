#!/usr/bin/env python3
"""judge.py's set-up shared by the tests of one run, and its features argument:

    test_judge.py

- once_per_run: children of one parent (as meson starts every test) compute once, the others
  read what the first kept; children of another parent compute anew; a child started by an
  interactive shell computes every time and keeps nothing;
- folder_once_per_run: children started at once make the folder once (the others wait on the
  lock), the folder of a run that ended is removed and one of a run going on is kept, and a make
  that raises leaves nothing behind;
- run_with_torch.sh asks each interpreter for torch once per parent in a build folder;
- features: all by default, --only picks in the judge's order, an unknown name exits 2,
  --features lists them.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from judge import Report  # noqa: E402

# A child: computes (or reads) a value and appends a line to COUNT each time it computes.
CHILD = r'''
import os, sys, time
sys.path.insert(0, sys.argv[1])
import judge
mode, folder, count = sys.argv[2], sys.argv[3], sys.argv[4]
def compute():
    with open(count, "a") as f:
        f.write("x\n")
    time.sleep(0.3)
    return {"v": 42}
def make(p):
    compute()
    if mode == "raise":
        raise RuntimeError("make failed")
    with open(os.path.join(p, "file"), "w") as f:
        f.write("made")
if mode == "value":
    print(judge.once_per_run(folder, "thing", compute)["v"])
else:
    try:
        p = judge.folder_once_per_run(folder, "tree", make)
        print(open(os.path.join(p, "file")).read())
    except RuntimeError as e:
        print(e)
'''


def children(top, mode, n, via=None):
    """Start n children at once from this process (or through `via`, a shell); their outputs."""
    child = os.path.join(top, "child.py")
    argv = [sys.executable, child, HERE, mode, os.path.join(top, "cache"), os.path.join(top, "count")]
    if via:
        argv = [via, "-c", '"$@"; :', via] + argv  # the `; :` keeps the shell from exec'ing the child
    ps = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    return [p.communicate()[0].strip() for p in ps]


def count(top):
    path = os.path.join(top, "count")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return len(f.read().splitlines())


def reset(top):
    shutil.rmtree(os.path.join(top, "cache"), ignore_errors=True)
    if os.path.exists(os.path.join(top, "count")):
        os.unlink(os.path.join(top, "count"))


def main():
    rep = Report()
    top = tempfile.mkdtemp(prefix="judge-test-")
    try:
        with open(os.path.join(top, "child.py"), "w") as f:
            f.write(CHILD)
        outs = children(top, "value", 1) + children(top, "value", 3)
        rep.check("once_per_run: four children of one parent, the value computed once",
                  ([] if outs == ["42"] * 4 else ["outputs %r" % outs])
                  + ([] if count(top) == 1 else ["computed %d times" % count(top)]))
        sh = children(top, "value", 1, via="sh")
        rep.check("once_per_run: through sh (as run_with_torch.sh runs a judge), the parent's value is read",
                  [] if sh == ["42"] and count(top) == 1 else ["output %r, computed %d times" % (sh, count(top))])
        sub = subprocess.run([sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)",
                              sys.executable, os.path.join(top, "child.py"), HERE, "value", os.path.join(top, "cache"),
                              os.path.join(top, "count")], stdout=subprocess.PIPE, text=True)
        rep.check("once_per_run: a child of another parent computes anew",
                  [] if sub.stdout.strip() == "42" and count(top) == 2 else
                  ["output %r, computed %d times" % (sub.stdout, count(top))])
        if shutil.which("bash"):
            reset(top)
            outs = children(top, "value", 1, via="bash") + children(top, "value", 1, via="bash")
            rep.check("once_per_run: started by an interactive shell (a run by hand), computed each time",
                      [] if outs == ["42", "42"] and count(top) == 2 else
                      ["outputs %r, computed %d times" % (outs, count(top))])

        reset(top)
        outs = children(top, "folder", 3)
        rep.check("folder_once_per_run: three children at once, the folder made once",
                  ([] if outs == ["made"] * 3 else ["outputs %r" % outs])
                  + ([] if count(top) == 1 else ["made %d times" % count(top)]))
        # the folders of runs that ended go, those of runs still going stay
        with open("/proc/%d/stat" % os.getppid()) as f:  # a run going on: this test's parent's
            going = "%d-%s" % (os.getppid(), f.read().rsplit(")", 1)[1].split()[19])
        dead, live = (os.path.join(top, "cache", "tree.run-" + t) for t in ("4194303-1", going))
        os.makedirs(dead)
        os.makedirs(live)
        outs = children(top, "folder", 1)
        rep.check("folder_once_per_run: the folder of a run that ended is removed, one of a run going on kept",
                  ([] if outs == ["made"] else ["outputs %r" % outs]) + (["the ended run's is there"] if
                  os.path.exists(dead) else []) + ([] if os.path.isdir(live) else ["the live run's was removed"]))
        reset(top)
        outs = children(top, "raise", 1)
        left = sorted(x for x in os.listdir(os.path.join(top, "cache")) if not x.endswith(".lock"))
        rep.check("folder_once_per_run: a make that raises propagates and leaves nothing behind",
                  ([] if outs == ["make failed"] else ["outputs %r" % outs]) + (["left %s" % left] if left else []))

        # run_with_torch.sh: an interpreter asked for torch once per parent, in a build folder
        build = os.path.join(top, "build")
        os.makedirs(os.path.join(build, "tests"))
        open(os.path.join(build, "build.ninja"), "w").close()
        open(os.path.join(build, "script.py"), "w").close()  # what /usr/bin/python3 runs, where it has torch
        fake = os.path.join(top, "fakepy")
        with open(fake, "w") as f:  # an interpreter that says it imports torch, counting each time it is asked
            f.write('#!/bin/sh\nif [ "$1" = -c ]; then echo x >>"%s"; echo 9.9; else echo "ran $*"; fi\n'
                    % os.path.join(top, "asked"))
        os.chmod(fake, 0o755)
        env = dict(os.environ, TENSORCTL_TEST_PYTHON=fake, TENSORCTL_EXTRA_PYTHONS="")
        rwt = os.path.join(HERE, "run_with_torch.sh")
        two = subprocess.run([sys.executable, "-c", "import subprocess, sys\nfor _ in range(2): subprocess.run(sys.argv[1:])",
                              "sh", rwt, "script.py"], cwd=build, env=env, stdout=subprocess.PIPE, text=True)
        with open(os.path.join(top, "asked")) as f:
            asked = len(f.read().splitlines())
        rep.check("run_with_torch.sh: two tests of one run ask the interpreter for torch once",
                  ([] if two.stdout.count("ran script.py") == 2 and "(torch 9.9)" in two.stdout
                   else ["output %r" % two.stdout]) + ([] if asked == 1 else ["asked %d times" % asked]))

        # features
        code = "import sys; sys.path.insert(0, %r); import judge; print(judge.features(sys.argv[1:], ['a', 'b', 'c']))" % HERE
        cases = [([], "(['a', 'b', 'c'], [])"), (["x", "--only", "c,a", "y"], "(['a', 'c'], ['x', 'y'])")]
        for args, want in cases:
            p = subprocess.run([sys.executable, "-c", code] + args, stdout=subprocess.PIPE, text=True)
            rep.check("features %s" % " ".join(args), [] if p.stdout.strip() == want else ["got %r" % p.stdout])
        p = subprocess.run([sys.executable, "-c", code, "--only", "d"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        rep.check("features: an unknown name exits 2, naming the features",
                  [] if p.returncode == 2 and "a, b, c" in p.stderr else ["exit %d: %s" % (p.returncode, p.stderr)])
        p = subprocess.run([sys.executable, "-c", code, "--features"], stdout=subprocess.PIPE, text=True)
        rep.check("features: --features lists them", [] if p.stdout.split() == ["a", "b", "c"] else [p.stdout])
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
