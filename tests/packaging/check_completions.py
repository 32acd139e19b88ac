"""The shell completions offer what tensorctl takes, in the shell itself.

    check_completions.py SHELL TENSORCTL SCRIPT [MESON BUILD_ROOT SAMPLE]

SHELL is bash, zsh or fish; SCRIPT the completion file the build generated for it.
Each check types a command line into that shell's own completion machinery and
compares the words offered with what they must be:
  - bash: the file sourced, `complete -p tensorctl` names its function, which is
    called as bash calls it (COMP_WORDS split as readline splits them, '=' a word
    of its own); bash-completion's loader finds the file by its installed name
  - zsh: `zsh -n`, then an interactive zsh on a pseudo-terminal (zsh_complete.zsh)
    with compinit, the file in fpath, typed the line and a TAB
  - fish: `fish -n`, then `complete -C LINE` with the file sourced
The words: commands and options as `tensorctl --help` and `tensorctl CMD --help`
list them (parsed from the binary's output, so the scripts and the binary cannot
drift apart), --dtype values that tensorctl accepts (each one cast with, with
SAMPLE), choices, devices, and operands by their suffixes in a folder of files.
With MESON and BUILD_ROOT, the file is installed where that shell looks.
A shell that is not installed: exit 77, saying so.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import Report  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# bash's side of a check: the script sourced, then the function called with COMP_WORDS
# split as readline splits the line (blanks, and '=' as a word of its own).
BASH_DRIVER = r'''
source "$1" || exit 1
line=$2
words=()
for w in $line; do
    while [[ $w == *=* ]]; do
        [ -n "${w%%=*}" ] && words+=("${w%%=*}")
        words+=("=")
        w=${w#*=}
    done
    [ -n "$w" ] && words+=("$w")
done
[[ $line == *" " || $line == *= ]] && words+=("")
[[ ${words[${#words[@]}-1]} == = ]] && words+=("")
COMP_WORDS=("${words[@]}")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$line
COMP_POINT=${#line}
COMPREPLY=()
_tensorctl tensorctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
'''


def sh(args, cwd=None, env=None, timeout=120):
    r = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


class Shell:
    def __init__(self, name, script, home):
        self.name, self.script, self.home = name, script, home
        self.fpath = None
        if name == "zsh":  # compinit finds the function by its name in a folder of fpath
            self.fpath = os.path.join(home, "fpath")
            os.makedirs(self.fpath, exist_ok=True)
            shutil.copy(script, os.path.join(self.fpath, "_tensorctl"))

    def env(self):
        e = dict(os.environ, HOME=self.home, XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                 XDG_DATA_HOME=os.path.join(self.home, ".local", "share"))
        e.pop("XDG_DATA_DIRS", None)
        return e

    def offered(self, lines, cwd):
        """For each of lines, the words the shell's completion offers at its end (folders
        without their '/')."""
        if self.name == "zsh":  # one interactive shell types them all
            rc, out, err = sh(["zsh", "-f", os.path.join(HERE, "zsh_complete.zsh"), self.fpath] + lines,
                              cwd=cwd, env=self.env(), timeout=240)
            if rc:
                raise RuntimeError("zsh exited %d: %s" % (rc, err.strip()))
            outs = out.split("__end__\n")[:-1]
            if len(outs) != len(lines):
                raise RuntimeError("zsh completed %d lines of %d: %s" % (len(outs), len(lines), err.strip()))
        else:
            outs = []
            for line in lines:
                if self.name == "bash":
                    args = ["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash", self.script, line]
                else:
                    args = ["fish", "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", self.script, line]
                rc, out, err = sh(args, cwd=cwd, env=self.env())
                if rc:
                    raise RuntimeError("%s exited %d on '%s': %s" % (self.name, rc, line, err.strip()))
                outs.append(out)
        result = []
        for line, out in zip(lines, outs):
            words = set()
            last = line.split(" ")[-1]
            for w in out.splitlines():
                w = w.split("\t")[0]
                if self.name == "fish" and "=" in last and w.startswith(last.split("=")[0] + "="):
                    w = w.split("=", 1)[1]  # fish gives --dtype=float16 for --dtype=
                if w:
                    words.add(w.rstrip("/") if w != "/" else w)
            result.append(words)
        return result


def format_choices(tensorctl):
    """The values convert --help gives for --format (pt|safetensors|...)."""
    out = subprocess.run([tensorctl, "convert", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    m = re.search(r"--format ([a-z|]+)", out)
    return set(m.group(1).split("|")) if m else {"(no --format in convert --help)"}


def parse_commands(tensorctl):
    """The commands `tensorctl --help` lists (its 'commands:' section, a name a line)."""
    rc, out, err = sh([tensorctl, "--help"])
    names, inside = [], False
    for line in out.splitlines():
        if line.strip().lower().startswith("commands"):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s+([a-z][a-z0-9-]*)\b", line)
            if not m:
                if names:
                    break
                continue
            names.append(m.group(1))
    return names


def parse_options(tensorctl, cmd):
    """The option names `tensorctl CMD --help` lists: ({'--json', ...}, {'-q', ...})."""
    rc, out, err = sh([tensorctl, cmd, "--help"])
    longs, shorts = set(), set()
    for line in out.splitlines():
        m = re.match(r"^\s+(?:(-[A-Za-z0-9]),\s+)?(--[a-z0-9][a-z0-9-]*)", line)
        if m:
            longs.add(m.group(2))
            if m.group(1):
                shorts.add(m.group(1))
    return longs, shorts


def want(rep, what, got, expected):
    problems = []
    if got != expected:
        if expected - got:
            problems.append("missing: %s" % " ".join(sorted(expected - got)))
        if got - expected:
            problems.append("not expected: %s" % " ".join(sorted(got - expected)))
    return rep.check(what, problems)


def installed_where_found(rep, shell, meson, build_root, script):
    """The install plan puts the script where its shell looks (prefix /usr or /usr/local)."""
    rc, out, err = sh([meson, "introspect", "--installed", build_root])
    if rc:
        return rep.check("%s: the install plan" % shell, ["meson introspect exited %d: %s" % (rc, err.strip())])
    plan = json.loads(out)
    dest = plan.get(os.path.abspath(script))
    if dest is None:
        rep.check("%s: the completion is installed" % shell, ["not in the install plan: %s" % sorted(plan.values())])
        return
    d = os.path.dirname(dest)
    prefix = d.split("/share/")[0] if "/share/" in d else None
    if prefix not in ("/usr", "/usr/local"):
        print("SKIP %s: installed to %s, under a prefix the shell does not search unless told" % (shell, dest))
        return
    # the XDG default, which is what bash-completion and fish take when XDG_DATA_DIRS is not set
    # (Debian's fish takes only /usr/share then: a prefix of /usr/local needs XDG_DATA_DIRS)
    xdg = ["/usr/local/share", "/usr/share"]
    if shell == "bash":
        dirs = [x + "/bash-completion/completions" for x in xdg]
        name_ok = os.path.basename(dest) in ("tensorctl", "tensorctl.bash", "_tensorctl")
    elif shell == "zsh":
        rc, out, err = sh(["zsh", "-fc", "print -l $fpath"])
        dirs = out.split()
        name_ok = os.path.basename(dest) == "_tensorctl"
    else:
        dirs = [x + "/fish/vendor_completions.d" for x in xdg]
        name_ok = os.path.basename(dest) == "tensorctl.fish"
    rep.check("%s: installed as %s, where %s looks" % (shell, dest, shell),
              ([] if d in dirs else ["%s is not among %s" % (d, dirs)]) +
              ([] if name_ok else ["%s is not a name %s loads for tensorctl" % (os.path.basename(dest), shell)]))


def main():
    if len(sys.argv) not in (4, 7):
        print(__doc__)
        return 2
    shell, tensorctl, script = sys.argv[1:4]
    meson, build_root, sample = sys.argv[4:7] if len(sys.argv) == 7 else (None, None, None)
    if not shutil.which(shell):
        print("SKIP: %s is not installed (apt-get install %s); its completion was not checked" % (shell, shell))
        return 77
    rep = Report()
    home = tempfile.mkdtemp(prefix="tensorctl-completions-")
    try:
        sh_ = Shell(shell, os.path.abspath(script), home)
        if shell == "bash":
            rc, out, err = sh(["bash", "--norc", "--noprofile", "-c", 'source "$1" && complete -p tensorctl',
                               "bash", script])
            rep.check("bash: complete -p tensorctl after sourcing",
                      [] if rc == 0 and out.strip() == "complete -F _tensorctl tensorctl"
                      else ["exit %d: %s%s" % (rc, out.strip(), err.strip())])
            loader = "/usr/share/bash-completion/bash_completion"
            if os.path.exists(loader):
                share = os.path.join(home, "share")
                os.makedirs(os.path.join(share, "bash-completion", "completions"))
                shutil.copy(script, os.path.join(share, "bash-completion", "completions", "tensorctl.bash"))
                rc, out, err = sh(["bash", "--norc", "--noprofile", "-c",
                                   'source "$1"; _completion_loader tensorctl; complete -p tensorctl', "bash",
                                   loader], env=dict(sh_.env(), XDG_DATA_DIRS=share))
                rep.check("bash: bash-completion loads it as tensorctl.bash from XDG_DATA_DIRS",
                          [] if out.strip() == "complete -F _tensorctl tensorctl" else
                          ["exit %d: %s %s" % (rc, out.strip(), err.strip())])
            else:
                print("SKIP bash: bash-completion is not installed (apt-get install bash-completion): "
                      "its loader was not tried")
        else:
            rc, out, err = sh([shell, "-n", script])
            rep.check("%s -n: the file parses" % shell, [] if rc == 0 else ["exit %d: %s" % (rc, err.strip())])

        # a folder of operands: checkpoints by their suffixes, others, a folder
        work = os.path.join(home, "work")
        os.makedirs(os.path.join(work, "step-100"))
        for f in ["a.pt", "b.safetensors", "m.safetensors.index.json", "pytorch_model.bin.index.json",
                  "notes.txt", "config.json"]:
            open(os.path.join(work, f), "w").close()

        commands = parse_commands(tensorctl)
        rep.check("tensorctl --help lists commands", [] if len(commands) >= 5 else ["found %s" % commands])
        try:
            cases = [
                ("tensorctl in", {"inspect"}),
                ("tensorctl inspect --j", {"--json"}),
                ("tensorctl convert --dtype b", {"bfloat16"}),
                ("tensorctl to-cuda --device ", {"cuda"}),
                ("tensorctl convert --format ", format_choices(tensorctl)),
                ("tensorctl help co", {c for c in commands if c.startswith("co")}),
                ("tensorctl inspect ", {"a.pt", "b.safetensors", "m.safetensors.index.json",
                                        "pytorch_model.bin.index.json", "step-100"}),
                ("tensorctl diff a.pt ", {"a.pt", "b.safetensors", "m.safetensors.index.json",
                                          "pytorch_model.bin.index.json", "step-100"}),
                ("tensorctl inspect no", {"notes.txt"}),  # nothing by suffix: every file
                ("tensorctl to-cpu a.pt -o no", {"notes.txt"}),
                ("tensorctl to-cpu a.pt --output c", {"config.json"}),
            ]
            opts = [(cmd,) + parse_options(tensorctl, cmd) for cmd in commands]
            lines = ([line for line, _ in cases] + ["tensorctl "] + ["tensorctl %s --" % c for c, _, _ in opts] +
                     ["tensorctl devices ", "tensorctl to-cpu a.pt --dtype="])
            got = dict(zip(lines, sh_.offered(lines, work)))
            for line, expected in cases:
                want(rep, "%s: '%s<TAB>'" % (shell, line), got[line], expected)
            rep.check("%s: 'tensorctl <TAB>' offers every command of tensorctl --help" % shell,
                      ["missing: %s" % c for c in commands if c not in got["tensorctl "]])
            for cmd, longs, shorts in opts:
                want(rep, "%s: 'tensorctl %s --<TAB>' offers the options of its --help" % (shell, cmd),
                     got["tensorctl %s --" % cmd], longs)
            rep.check("%s: no operands offered for devices" % shell,
                      ["offered: %s" % w for w in got["tensorctl devices "] if not w.startswith("-")])
            dtypes = got["tensorctl to-cpu a.pt --dtype="]
            rep.check("%s: '--dtype=<TAB>' offers the casts" % shell,
                      [] if {"float16", "bfloat16", "float32"} <= dtypes else ["offered: %s" % sorted(dtypes)])
            if sample and shell == "bash":
                # every word offered is a cast tensorctl makes; a floating-point type it does not is not offered
                problems = []
                for d in sorted(dtypes):
                    out = os.path.join(home, "cast-%s.pt" % d)
                    rc, _, err = sh([tensorctl, "to-cpu", sample, "--dtype", d, "-o", out, "-q"])
                    if rc:
                        problems.append("--dtype %s: exit %d: %s" % (d, rc, err.strip()))
                if "float8_e5m2fnuz" in dtypes:
                    problems.append("float8_e5m2fnuz offered, which --dtype does not cast to")
                rep.check("bash: tensorctl to-cpu casts with each of %s" % " ".join(sorted(dtypes)), problems)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            rep.check("%s: completions run" % shell, [str(e)])

        if meson:
            installed_where_found(rep, shell, meson, build_root, script)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
