"""tensorctl from Python: the binary run, its reports returned as Python objects.

    import tensorctl
    report = tensorctl.inspect("model.pt")             # `tensorctl inspect --json model.pt`
    report["verdict"], [t["name"] for t in report["tensors"]]
    tensorctl.inspect("model.pt", hash=True)["tensors"][0]["sha256"]
    tensorctl.run(["to-cpu", "model.pt", "-o", "model.cpu.pt"])

Nothing of the checkpoint is read in Python and nothing in it is unpickled:
the tensorctl binary installed beside this module reads it (no torch needed).
The binary is the first of: $TENSORCTL, the scripts folder of the installation
this module is part of (a virtualenv's bin/, ~/.local/bin), tensorctl on PATH.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

__all__ = ["Error", "binary", "inspect", "run"]

# inspect's exit status for a file that would run code when loaded: its report is
# still complete (verdict "unsafe" or "dangerous"), so it is returned, not raised.
_EXIT_UNSAFE = 4


class Error(Exception):
    """tensorctl exited with a failure: the status, and what it said on stderr."""

    def __init__(self, args, returncode, stderr):
        self.args_run = list(args)
        self.returncode = returncode
        self.stderr = stderr
        lines = [line for line in stderr.splitlines() if line.strip()]
        message = lines[0] if lines else "tensorctl exited with status %d" % returncode
        super().__init__(message)


def _scripts_dirs():
    # where pip put the binary: the scheme of the prefix this module is installed in
    here = os.path.dirname(os.path.abspath(__file__))
    schemes = [None]
    if sys.platform != "win32":
        schemes.append("posix_user")
    for scheme in schemes:
        try:
            paths = sysconfig.get_paths(scheme) if scheme else sysconfig.get_paths()
        except KeyError:
            continue
        for lib in (paths.get("purelib"), paths.get("platlib")):
            if lib and os.path.abspath(lib) == os.path.dirname(here):
                yield paths["scripts"]
    yield sysconfig.get_path("scripts")


def binary():
    """The path of the tensorctl binary this module runs."""
    env = os.environ.get("TENSORCTL")
    if env:
        return env
    for d in _scripts_dirs():
        path = os.path.join(d, "tensorctl")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    path = shutil.which("tensorctl")
    if path:
        return path
    raise FileNotFoundError("the tensorctl binary is not installed beside this module nor on PATH "
                            "(reinstall the tensorctl package, or set TENSORCTL to its path)")


def run(args, check=True, capture_output=False, timeout=None, ok=(0,)):
    """Run `tensorctl ARGS...`; returns the subprocess.CompletedProcess.

    With check, an exit status outside ok raises Error (stderr is captured for it
    then, and also printed when capture_output is false). diff exits 1 for
    "different": pass ok=(0, 1) to get that as a result."""
    cmd = [binary()] + [os.fspath(a) for a in args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE if capture_output else None,
                       stderr=subprocess.PIPE if (check or capture_output) else None,
                       timeout=timeout, check=False)
    stderr = r.stderr.decode("utf-8", "replace") if r.stderr is not None else ""
    if r.stderr is not None and not capture_output and stderr:
        sys.stderr.write(stderr)
    if check and r.returncode not in ok:
        raise Error(cmd, r.returncode, stderr)
    return r


def inspect(path, hash=False, args=(), timeout=None):
    """`tensorctl inspect --json PATH` as Python objects (dicts, lists, str, int).

    hash adds every tensor's SHA-256 (--hash: reads the tensor data). args are
    more options (["--max-pickle-size", "4GiB"]). A file that would run code when
    loaded is reported (report["verdict"]), not raised; a file tensorctl cannot
    read raises Error with its message."""
    cmd = ["inspect", "--json"] + (["--hash"] if hash else []) + list(args) + ["--", path]
    r = run(cmd, capture_output=True, timeout=timeout, ok=(0, _EXIT_UNSAFE))
    return json.loads(r.stdout.decode("utf-8"))
