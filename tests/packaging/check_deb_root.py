"""The Debian package installed into a fresh Debian 12 root, as a user installs it.

    check_deb_root.py SOURCE_ROOT SAMPLE VERSION CACHE_DIR

The .deb is built from a copy of the tree (as package-deb builds it), then installed into a
Debian 12 (bookworm) root made by `debootstrap --variant=minbase` from the mirror
($TENSORCTL_DEBIAN_MIRROR, default http://deb.debian.org/debian): `dpkg -i` of the .deb, which
leaves it unconfigured for want of its libraries (cJSON is not in minbase), then
`apt-get -f install`, which fetches them from the mirror and configures it. In the root, run by
chroot:
  - dpkg says tensorctl is installed, its libraries with it
  - `tensorctl --version` says VERSION
  - `tensorctl inspect SAMPLE` (the sample copied in) lists its tensors and says it is safe, and
    `inspect --json --hash` gives the tensors as torch saved them (SAMPLE's expect.json)
  - the man page and the bash completion are where Debian looks for them
The bootstrapped root is kept in CACHE_DIR (under the build folder) and copied for each run, so a
rerun downloads only the package's libraries; the copy is removed afterwards. Times are printed:
how long debootstrap (or the copy of the cached root) and the installation took.
Skips (exit 77, saying why) when not run as root, without debootstrap or chroot, when the .deb
cannot be built here (dpkg-dev, debhelper, build dependencies), or when the mirror cannot be
reached.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import Report, run  # noqa: E402
from installed import build_deb, check_report, deb_tools_missing  # noqa: E402

SUITE = "bookworm"
MAN = "usr/share/man/man1/tensorctl.1.gz"
BASH_COMPLETION = "usr/share/bash-completion/completions/tensorctl.bash"
LIBS = ["libcjson1", "zlib1g", "libssl3"]
# what a command run in the root sees: no terminal questions, a plain PATH, no locale of the host's
ROOT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
            "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8", "TERM": "dumb"}


def skip(why):
    print("SKIP: " + why)
    return 77


def mirror_reachable(mirror):
    """None when the mirror answers for bookworm's Release file, else why not."""
    url = mirror.rstrip("/") + "/dists/%s/Release" % SUITE
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            r.read(64)
        return None
    except Exception as e:  # noqa: BLE001 -- any failure to reach it is a reason to skip
        return "the Debian mirror %s cannot be reached (%s); set TENSORCTL_DEBIAN_MIRROR to one that can" % (url, e)


def base_root(cache, mirror, rep):
    """The cached minbase root for mirror (made by debootstrap when missing): its path and the seconds
    debootstrap took (0 when cached), or None after a failed check."""
    base, stamp = os.path.join(cache, "base"), os.path.join(cache, "base.mirror")
    if os.path.isdir(base) and os.path.exists(stamp) and open(stamp).read() == mirror:
        return base, 0.0
    shutil.rmtree(base, ignore_errors=True)
    partial = base + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(cache, exist_ok=True)
    t0 = time.monotonic()
    rc, out, err = run("debootstrap", "--variant=minbase", SUITE, partial, mirror)
    took = time.monotonic() - t0
    if not rep.check("debootstrap --variant=minbase %s from %s (%.0f s)" % (SUITE, mirror, took),
                     [] if rc == 0 else ["exit %d" % rc] + (out + err).strip().splitlines()[-10:]):
        shutil.rmtree(partial, ignore_errors=True)
        return None
    os.rename(partial, base)
    with open(stamp, "w") as f:
        f.write(mirror)
    return base, took


def in_root(root, *cmd, timeout=1800):
    """cmd run in root by chroot: (exit status, stdout, stderr)."""
    p = subprocess.run(["chroot", root] + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=ROOT_ENV, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def tail(out, err, n=8):
    return (out + err).strip().splitlines()[-n:]


def install_and_check(rep, root, deb, sample, version):
    """The .deb installed in root and tensorctl run there; the seconds the installation took."""
    shutil.copy("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))  # apt in the root reaches the mirror
    shutil.copy(deb, os.path.join(root, "tmp"))
    inside_deb = "/tmp/" + os.path.basename(deb)
    for name in (os.path.basename(sample), os.path.basename(sample) + ".expect.json"):
        shutil.copy(os.path.join(os.path.dirname(sample), name), os.path.join(root, "tmp"))
    inside_sample = "/tmp/" + os.path.basename(sample)
    t0 = time.monotonic()
    rc, out, err = in_root(root, "apt-get", "update", "-q")
    if not rep.check("apt-get update in the root", ["exit %d" % rc] + tail(out, err) if rc else []):
        return None
    # dpkg -i alone cannot configure it (libcjson1 is missing): it says so and exits 1; apt-get -f
    # install then brings what it depends on and configures it
    rc, out, err = in_root(root, "dpkg", "-i", inside_deb)
    rep.check("dpkg -i unpacks the .deb (exit 0, or 1 for the dependencies apt-get -f install brings)",
              [] if rc in (0, 1) and "tensorctl" in out + err else ["exit %d" % rc] + tail(out, err))
    rc, out, err = in_root(root, "apt-get", "-f", "install", "-y", "-q")
    took = time.monotonic() - t0
    if not rep.check("apt-get -f install brings the dependencies and configures tensorctl (%.0f s)" % took,
                     ["exit %d" % rc] + tail(out, err) if rc else []):
        return took
    rc, out, err = in_root(root, "dpkg-query", "-W", "-f", "${Package} ${Status}\n", "tensorctl", *LIBS)
    status = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    rep.check("dpkg: tensorctl and %s installed" % ", ".join(LIBS),
              ["%s: %s" % (p, status.get(p, "not installed")) for p in ["tensorctl"] + LIBS
               if status.get(p) != "install ok installed"])
    rc, out, err = in_root(root, "tensorctl", "--version")
    rep.check("tensorctl --version in the root says %s" % version,
              [] if rc == 0 and out.strip() == "tensorctl " + version else ["exit %d: %r %r" % (rc, out, err)])
    rc, out, err = in_root(root, "tensorctl", "inspect", inside_sample)
    with open(sample + ".expect.json") as f:
        names = [".".join(t["path"]) for t in json.load(f)["tensors"]]
    lines = out.splitlines()
    rep.check("tensorctl inspect %s in the root: exit 0, every tensor listed, the verdict safe"
              % os.path.basename(sample),
              ["exit %d: %s" % (rc, err.strip())] if rc else
              ["no line for %s" % n for n in names if not any(line.split()[:1] == [n] for line in lines)] +
              ([] if any(line.startswith("verdict:") and ": safe: " in line for line in lines)
               else ["no safe verdict line: %s" % lines[-3:]]))
    rc, out, err = in_root(root, "tensorctl", "inspect", "--json", "--hash", inside_sample)
    if rc:
        rep.check("tensorctl inspect --json --hash in the root", ["exit %d: %s" % (rc, err.strip())])
    else:
        check_report(rep, "tensorctl inspect --json --hash in the root: the tensors torch saved", json.loads(out),
                     sample)
    rep.check("the man page and the bash completion where Debian looks for them",
              ["no /%s" % p for p in (MAN, BASH_COMPLETION) if not os.path.exists(os.path.join(root, p))])
    return took


def main():
    src, sample, version, cache = sys.argv[1:5]
    sample = os.path.abspath(sample)
    mirror = os.environ.get("TENSORCTL_DEBIAN_MIRROR") or "http://deb.debian.org/debian"
    if os.geteuid() != 0:
        return skip("installing into a fresh Debian root needs root (debootstrap, chroot)")
    for tool in ("debootstrap", "chroot"):
        if shutil.which(tool) is None:
            return skip("%s is needed (apt-get install %s)" % (tool, "debootstrap" if tool == "debootstrap"
                                                                 else "coreutils"))
    why = deb_tools_missing() or mirror_reachable(mirror)
    if why:
        return skip(why)
    rep = Report()
    with tempfile.TemporaryDirectory(prefix="tensorctl-deb-root-") as tmp:
        deb = build_deb(rep, src, version, tmp)
        if deb is None or deb == 77:
            return 77 if deb == 77 else rep.finish()
        made = base_root(cache, mirror, rep)
        if made is None:
            return rep.finish()
        base, boot = made
        root = os.path.join(cache, "run")
        shutil.rmtree(root, ignore_errors=True)
        t0 = time.monotonic()
        rc, out, err = run("cp", "-a", base, root)
        copy = time.monotonic() - t0
        if not rep.check("the bootstrapped root copied for this run", ["exit %d: %s" % (rc, err.strip())] if rc else []):
            return rep.finish()
        proc = os.path.join(root, "proc")
        mounted = run("mount", "-t", "proc", "proc", proc)[0] == 0  # for maintainer scripts that read it
        try:
            took = install_and_check(rep, root, deb, sample, version)
        finally:
            if mounted:
                run("umount", "-l", proc)
            shutil.rmtree(root, ignore_errors=True)
        print("times: debootstrap %s, the installation (apt-get update, dpkg -i, apt-get -f install) %s" %
              ("%.0f s" % boot if boot else "not needed (the cached root, copied in %.0f s)" % copy,
               "%.0f s" % took if took is not None else "not finished"))
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
