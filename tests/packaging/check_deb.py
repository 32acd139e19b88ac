"""The Debian package, built from the tree as debian/ says and unpacked into a throwaway root.

    check_deb.py SOURCE_ROOT SAMPLE VERSION

A copy of the tree is built with `dpkg-buildpackage -us -uc -b` (its build
dependencies checked first by dpkg-checkbuilddeps), and the .deb:
  - is named tensorctl_VERSION_ARCH.deb, and depends on the libraries the binary
    links (zlib, cJSON: dpkg-shlibdeps found them) and on the two it loads when
    first needed: OpenSSL's libcrypto (hashes) and libarchive (scan's archives)
  - holds the binary, the man page and the completions where bash-completion,
    Debian's zsh and fish look for them
  - unpacked (dpkg-deb -x) into a throwaway root: its binary says VERSION and reads
    SAMPLE as torch saved it, `man -l` renders its man page, and bash with its
    completion sourced has `complete -p tensorctl`
Installing it into a fresh Debian 12 root (debootstrap, from a mirror) is
check_deb_root.py's (package-deb-fresh-root). No dpkg-buildpackage, or build dependencies missing: exit 77,
saying what to install.
"""

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import Report, run  # noqa: E402
from installed import build_deb, check_binary, deb_tools_missing  # noqa: E402

# where each shell finds the completions of installed programs on Debian
COMPLETIONS = ["usr/share/bash-completion/completions/tensorctl.bash",
               "usr/share/zsh/vendor-completions/_tensorctl",
               "usr/share/fish/vendor_completions.d/tensorctl.fish"]
MAN = "usr/share/man/man1/tensorctl.1.gz"
# the sonames' packages on Debian 12 (libcjson1, zlib1g; libssl3 and libarchive13, loaded when needed)
LIBS = ["libcjson1", "zlib1g", "libssl3", "libarchive13"]


def main():
    src, sample, version = sys.argv[1:4]
    sample = os.path.abspath(sample)
    skip = deb_tools_missing()
    if skip:
        print("SKIP: " + skip)
        return 77
    rep = Report()
    with tempfile.TemporaryDirectory(prefix="tensorctl-deb-") as tmp:
        deb = build_deb(rep, src, version, tmp)
        if deb is None or deb == 77:
            return 77 if deb == 77 else rep.finish()

        rc, depends, err = run("dpkg-deb", "-f", deb, "Depends")
        rep.check("the package depends on the libraries the binary links and loads (%s)" % ", ".join(LIBS),
                  ["Depends: %s" % depends.strip()] if rc or any(lib not in depends for lib in LIBS) else [])
        rc, listing, err = run("dpkg-deb", "-c", deb)
        files = set(line.split()[-1].lstrip(".").lstrip("/") for line in listing.splitlines() if line.split())
        want = ["usr/bin/tensorctl", MAN] + COMPLETIONS
        rep.check("the package holds the binary, the man page and the completions where Debian's shells look",
                  ["no /%s" % w for w in want if w not in files])

        root = os.path.join(tmp, "root")
        rc, out, err = run("dpkg-deb", "-x", deb, root)
        if not rep.check("dpkg-deb -x unpacks it", ["exit %d: %s" % (rc, err.strip())] if rc else []):
            return rep.finish()
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        check_binary(rep, os.path.join(root, "usr/bin/tensorctl"), sample, version, cwd=work,
                     label="the unpacked /usr/bin/tensorctl")

        if shutil.which("man"):
            rc, out, err = run("man", "-l", os.path.join(root, MAN), env=dict(os.environ, MANPAGER="cat", PAGER="cat",
                                                                            MANWIDTH="80"))
            rep.check("man -l renders the packaged man page (NAME names tensorctl)",
                      [] if rc == 0 and "tensorctl" in out and "NAME" in out else ["exit %d: %s" % (rc, err.strip())])
        else:
            print("(man is not installed: the man page is not rendered; apt-get install man-db)")
        if shutil.which("bash"):
            rc, out, err = run("bash", "-c", 'source "$1" && complete -p tensorctl', "bash",
                               os.path.join(root, COMPLETIONS[0]))
            rep.check("bash with the packaged completion sourced: complete -p tensorctl",
                      [] if rc == 0 and out.strip().endswith(" tensorctl") else ["exit %d: %r %r" % (rc, out, err)])
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
