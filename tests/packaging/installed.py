"""What the package checks share: a copy of the source tree to build from, and the
checks that an installed tensorctl works.

    from installed import source_copy, check_binary, check_report, build_deb, deb_tools_missing
    source_copy(SOURCE_ROOT, dest)             # the tree as a clone has it, without builds
    deb_tools_missing()                        # why the .deb cannot be built here, or None
    deb = build_deb(rep, SOURCE_ROOT, VERSION, tmp)  # the .deb built from a copy in tmp (None: failed, 77: skip)
    check_binary(rep, exe, sample, version)    # --version, and inspect --json --hash of sample
    check_report(rep, what, report, sample)    # an inspect --json report against sample's expect.json

A package is built from a copy, never in the checkout: the build leaves folders of
its own (meson-python's .mesonpy-*, debhelper's obj-* and debian/tensorctl/), and two
builds of one tree at once would share them. The sample's expect.json was written by
torch itself (tests/torch_verify.py write-expect), so the installed binary is judged
against what torch.load gives, not against another tensorctl.
"""

import fnmatch
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import run  # noqa: E402

# what a checkout holds that a clone does not (.gitignore's): builds and their outputs
# at the top, the fuzzers' outputs, the CI's virtualenv, Python's caches anywhere
_TOP = ("build*", ".mesonpy*", "obj-*", "dist", ".whl", ".gl")
_UNDER = {"fuzz": ("out*",), ".ci": ("venv",)}
_ANYWHERE = (".git", "__pycache__")


def source_copy(src, dest):
    """src's tree copied to dest, less what _TOP, _UNDER and _ANYWHERE name."""
    src = os.path.abspath(src)

    def ignore(folder, names):
        rel = os.path.relpath(folder, src)
        patterns = _ANYWHERE + (_TOP if rel == "." else _UNDER.get(rel, ()))
        return set(n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns))
    shutil.copytree(src, dest, symlinks=True, ignore=ignore)


def check_report(rep, what, report, sample):
    """The tensors of an inspect --json --hash report as torch saw them in sample (its expect.json):
    names, dtypes, shapes, devices and the SHA-256 of each tensor's bytes."""
    with open(sample + ".expect.json") as f:
        want = {".".join(t["path"]): t for t in json.load(f)["tensors"]}
    got = {t.get("name"): t for t in report.get("tensors", [])}
    problems = []
    if sorted(got) != sorted(want):
        problems.append("tensors %s, torch saved %s" % (sorted(got), sorted(want)))
    for name in sorted(set(got) & set(want)):
        for key in ("dtype", "shape", "device", "sha256"):
            if got[name].get(key) != want[name].get(key):
                problems.append("%s: %s %r, torch saved %r" % (name, key, got[name].get(key), want[name].get(key)))
    if report.get("verdict") != "safe":
        problems.append("verdict %r (a state_dict torch loads with weights_only=True is safe)" % report.get("verdict"))
    rep.check(what, problems)


def check_binary(rep, exe, sample, version, env=None, cwd=None, label=None):
    """The installed binary exe (named label in the checks): `--version` says version, and
    `inspect --json --hash sample` reports sample's tensors as torch saved them."""
    label = label or exe
    rc, out, err = run(exe, "--version", env=env, cwd=cwd)
    rep.check("%s --version says %s" % (label, version),
              [] if rc == 0 and out.strip() == "tensorctl " + version else ["exit %d: %r %r" % (rc, out, err)])
    rc, out, err = run(exe, "inspect", "--json", "--hash", sample, env=env, cwd=cwd)
    if rc != 0:
        rep.check("%s inspect --json --hash %s" % (label, os.path.basename(sample)), ["exit %d: %s" % (rc, err.strip())])
        return
    check_report(rep, "%s inspect --json --hash %s: the tensors torch saved" % (label, os.path.basename(sample)),
                 json.loads(out), sample)


def deb_tools_missing():
    """Why the .deb cannot be built here (a tool missing, with its package), or None."""
    for tool, pkg in (("dpkg-buildpackage", "dpkg-dev"), ("dpkg-checkbuilddeps", "dpkg-dev"), ("dh", "debhelper")):
        if shutil.which(tool) is None:
            return "building the .deb needs %s (apt-get install %s)" % (tool, pkg)
    return None


def build_deb(rep, src, version, tmp):
    """The .deb `dpkg-buildpackage -us -uc -b` builds from a copy of src in tmp (its build dependencies
    checked first): its path, after a check in rep; None when the build failed (rep says why); 77 after
    printing SKIP when build dependencies are missing."""
    tree = os.path.join(tmp, "tensorctl-" + version)
    source_copy(src, tree)
    rc, out, err = run("dpkg-checkbuilddeps", cwd=tree)
    if rc != 0:
        print("SKIP: %s (apt-get install them)" % (err.strip() or out.strip()))
        return 77
    env = dict(os.environ, DEB_BUILD_OPTIONS=os.environ.get("DEB_BUILD_OPTIONS") or "parallel=2")
    rc, out, err = run("dpkg-buildpackage", "-us", "-uc", "-b", cwd=tree, env=env)
    debs = glob.glob(os.path.join(tmp, "tensorctl_%s_*.deb" % version))
    if not rep.check("dpkg-buildpackage -us -uc -b writes tensorctl_%s_ARCH.deb" % version,
                     [] if rc == 0 and len(debs) == 1 else
                     ["exit %d, files %s" % (rc, os.listdir(tmp))] + (out + err).strip().splitlines()[-15:]):
        return None
    return debs[0]
