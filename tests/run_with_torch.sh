#!/bin/sh
# Run a Python script under every interpreter here that can import torch:
#   $TENSORCTL_TEST_PYTHON (if set), /usr/bin/python3, and each entry of the colon-separated
#   $TENSORCTL_EXTRA_PYTHONS.
# usage: tests/run_with_torch.sh SCRIPT [ARGS...]
# An interpreter named in TENSORCTL_TEST_PYTHON or TENSORCTL_EXTRA_PYTHONS was asked for: if it
# is missing or cannot import torch, that is a failure, not a skip. /usr/bin/python3 without
# torch is passed over with a note.
# Exit 0 when every run passed; 77 (meson's "skipped") only when no interpreter has torch and
# none was asked for; otherwise the first failure's status (1 if that was 77 from a script
# whose torch half-works, or an interpreter asked for that cannot run).
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 SCRIPT [ARGS...]" >&2
    exit 2
fi

# Whether an interpreter imports torch, and its version, is asked once per `meson test`: every test
# it starts is its child, so the pid and start time of the nearest ancestor that is not sh (this
# script may run under with_reference_corpus.sh) name the run. The answers are kept in
# tests/run_with_torch.probe of the build folder, where meson runs its tests (a judge split into
# one test per feature would pay an import of torch per interpreter each). A run by hand (an
# interactive shell started it) or outside a build folder asks every time.
stat_field() { shift "$1"; echo "$1"; }  # N FIELDS...: the Nth field of /proc/PID/stat after the name
probe_file=
run_key=
pid=$PPID
while [ -f build.ninja ] && [ -d tests ] && stat=$(cat "/proc/$pid/stat" 2>/dev/null); do
    comm=${stat#*(}
    comm=${comm%)*}
    fields=${stat##*) }
    case "$comm" in
    sh|dash)
        # shellcheck disable=SC2086  # the fields, split
        pid=$(stat_field 2 $fields)
        [ "$pid" -gt 1 ] || break
        continue ;;
    bash|zsh|ksh|fish|tcsh|csh) break ;;
    esac
    # shellcheck disable=SC2086
    run_key="$pid $(stat_field 20 $fields)"
    probe_file=tests/run_with_torch.probe
    # a file of an earlier run is emptied (two tests doing so at once lose an answer: asked again)
    grep -q "^$run_key	" "$probe_file" 2>/dev/null || : >"$probe_file"
    break
done
torch_version() { # PY: prints the version of torch PY imports; fails when it imports none
    if [ -n "$probe_file" ] && v=$(awk -F '\t' -v k="$run_key" -v p="$1" \
            '$1 == k && $2 == p { print $3; found = 1; exit } END { exit !found }' "$probe_file" 2>/dev/null); then
        :
    else
        v=$("$1" -c 'import torch; print(torch.__version__)' 2>/dev/null) || v=-
        [ -z "$probe_file" ] || printf '%s\t%s\t%s\n' "$run_key" "$1" "$v" >>"$probe_file"
    fi
    [ "$v" != - ] && echo "$v"
}

asked=":${TENSORCTL_TEST_PYTHON:-}:${TENSORCTL_EXTRA_PYTHONS:-}:"
candidates="${TENSORCTL_TEST_PYTHON:-}:/usr/bin/python3:${TENSORCTL_EXTRA_PYTHONS:-}"
seen=":"
ran=0
status=0
fail() { # STATUS MESSAGE: remember the first failure
    echo "run_with_torch: $2" >&2
    [ $status -ne 0 ] || status=$1
}
old_ifs=$IFS
IFS=:
for py in $candidates; do
    IFS=$old_ifs
    [ -n "$py" ] || continue
    case "$seen" in *":$py:"*) continue ;; esac
    seen="$seen$py:"
    case "$asked" in *":$py:"*) wanted=1 ;; *) wanted=0 ;; esac
    if ! command -v "$py" >/dev/null 2>&1; then
        if [ $wanted -eq 1 ]; then fail 1 "FAIL $py: not found (named in TENSORCTL_TEST_PYTHON or TENSORCTL_EXTRA_PYTHONS)"
        else echo "run_with_torch: $py: not found, passed over" >&2; fi
        continue
    fi
    if ! version=$(torch_version "$py"); then
        if [ $wanted -eq 1 ]; then fail 1 "FAIL $py: cannot import torch (named in TENSORCTL_TEST_PYTHON or TENSORCTL_EXTRA_PYTHONS)"
        else echo "run_with_torch: $py: cannot import torch, passed over" >&2; fi
        continue
    fi
    echo "run_with_torch: $py (torch $version): $*"
    ran=$((ran + 1))
    "$py" "$@"
    rc=$?
    if [ $rc -ne 0 ]; then
        if [ $rc -eq 77 ]; then fail 1 "FAIL $py (torch $version): the script skipped (77) although torch imports"
        else fail $rc "FAIL $py (torch $version): exit $rc"; fi
    fi
done
IFS=$old_ifs

if [ $ran -eq 0 ] && [ $status -eq 0 ]; then
    echo "run_with_torch: SKIP: no Python with torch here (tried: $candidates)"
    exit 77
fi
exit $status
