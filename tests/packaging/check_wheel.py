"""The Python wheel, built and installed as a user would, and used from a fresh virtualenv.

    check_wheel.py SOURCE_ROOT SAMPLE VERSION

A copy of the tree is built with `python -m build --wheel` through meson-python
(pyproject.toml, without build isolation: no network is needed), the wheel is
installed with pip into a fresh virtualenv (no system site-packages), and from a
folder outside the tree:
  - the wheel holds the binary as a script and the tensorctl module, no man page
  - `tensorctl` on the virtualenv's PATH is the wheel's binary: --version, and
    inspect --json --hash of SAMPLE as torch saved it (SAMPLE.expect.json)
  - `import tensorctl`: tensorctl.binary() is that binary, tensorctl.inspect(SAMPLE,
    hash=True) gives the same tensors, an unreadable file raises tensorctl.Error
    with tensorctl's message, `python -m tensorctl --version` runs the binary
The Python that builds it needs meson-python and build (Debian: python3-mesonpy,
python3-build, python3-venv); none found: exit 77, saying what to install.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import Report, run  # noqa: E402
from installed import check_binary, check_report, source_copy  # noqa: E402

BUILD_NEEDS = "import mesonpy, build, venv, ensurepip"


def builder_python():
    """The first Python that can build the wheel and make a virtualenv with pip: this one,
    python3 on PATH, the system's (where apt puts python3-mesonpy)."""
    seen = set()
    for py in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if not py or py in seen or not os.access(py, os.X_OK):
            continue
        seen.add(py)
        if subprocess.run([py, "-c", BUILD_NEEDS], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


def main():
    src, sample, version = sys.argv[1:4]
    sample = os.path.abspath(sample)
    py = builder_python()
    if py is None:
        print("SKIP: building the wheel needs a Python with meson-python, build and venv "
              "(apt-get install python3-mesonpy python3-build python3-venv, or pip install meson-python build)")
        return 77
    rep = Report()
    with tempfile.TemporaryDirectory(prefix="tensorctl-wheel-") as tmp:
        tree = os.path.join(tmp, "src")
        source_copy(src, tree)
        dist = os.path.join(tmp, "dist")
        rc, out, err = run(py, "-m", "build", "--wheel", "--no-isolation", "-o", dist,
                           "-Ccompile-args=-j2", tree, cwd=tmp)
        wheels = glob.glob(os.path.join(dist, "tensorctl-%s-*.whl" % version))
        if not rep.check("python -m build --wheel (meson-python) writes tensorctl-%s-*.whl" % version,
                         [] if rc == 0 and len(wheels) == 1 else
                         ["exit %d, wheels %s" % (rc, os.listdir(dist) if os.path.isdir(dist) else [])]
                         + (out + err).strip().splitlines()[-15:]):
            return rep.finish()
        whl = wheels[0]
        with zipfile.ZipFile(whl) as z:
            names = z.namelist()
        # (meson-python puts the module under .data/purelib/, which pip installs as site-packages)
        script = "tensorctl-%s.data/scripts/tensorctl" % version
        modules = [m for m in ("tensorctl/__init__.py", "tensorctl/__main__.py")
                   if not any(n == m or n.endswith(".data/purelib/" + m) for n in names)]
        rep.check("the wheel holds the binary as a script and the tensorctl module, no man page",
                  ["no %s in %s" % (w, names) for w in ([script] if script not in names else []) + modules]
                  + ["%s in the wheel" % n for n in names if "man1" in n or "completion" in n])

        venv = os.path.join(tmp, "venv")
        rc, out, err = run(py, "-m", "venv", venv)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
        if rc == 0:
            rc, out, err = run(pip + ["install", "--no-index", "--no-deps", "--disable-pip-version-check", whl])
        if not rep.check("pip installs the wheel into a fresh virtualenv",
                         ["exit %d: %s" % (rc, (out + err).strip()[-2000:])] if rc else []):
            return rep.finish()

        # as a user of the virtualenv: its bin/ first on PATH, in a folder outside the tree
        # (so that python finds the installed module, not python/ of the checkout)
        bindir = os.path.join(venv, "bin")
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), VIRTUAL_ENV=venv)
        env.pop("PYTHONPATH", None)
        env.pop("TENSORCTL", None)
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        found = shutil.which("tensorctl", path=env["PATH"])
        rep.check("tensorctl on the virtualenv's PATH is the wheel's binary",
                  [] if found == os.path.join(bindir, "tensorctl") else ["which tensorctl: %s" % found])
        check_binary(rep, "tensorctl", sample, version, env=env, cwd=work)

        vpy = os.path.join(bindir, "python")
        script = (
            "import json, sys, tensorctl\n"
            "r = tensorctl.inspect(sys.argv[1], hash=True)\n"
            "try:\n"
            "    tensorctl.inspect(sys.argv[2])\n"
            "    err = None\n"
            "except tensorctl.Error as e:\n"
            "    err = [e.returncode, str(e)]\n"
            "print(json.dumps({'module': tensorctl.__file__, 'binary': tensorctl.binary(),\n"
            "                  'report': r, 'error': err}))\n")
        missing = os.path.join(work, "missing.pt")
        rc, out, err = run(vpy, "-c", script, sample, missing, env=env, cwd=work)
        if rep.check("import tensorctl; tensorctl.inspect() runs", ["exit %d: %s" % (rc, err.strip())] if rc else []):
            got = json.loads(out)
            site = os.path.realpath(venv)
            rep.check("the module and the binary it runs are the virtualenv's",
                      ["module %s" % got["module"]] * (not os.path.realpath(got["module"]).startswith(site))
                      + ["binary %s" % got["binary"]] * (os.path.realpath(got["binary"]) !=
                                                          os.path.realpath(os.path.join(bindir, "tensorctl"))))
            check_report(rep, "tensorctl.inspect(SAMPLE, hash=True): the tensors torch saved", got["report"], sample)
            e = got["error"]
            rep.check("tensorctl.inspect of a missing file raises tensorctl.Error with tensorctl's message",
                      [] if e and e[0] != 0 and "missing.pt" in e[1] else ["got %r" % (e,)])
        rc, out, err = run(vpy, "-m", "tensorctl", "--version", env=env, cwd=work)
        rep.check("python -m tensorctl --version runs the binary",
                  [] if rc == 0 and out.strip() == "tensorctl " + version else ["exit %d: %r %r" % (rc, out, err)])
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
