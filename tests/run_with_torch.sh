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
    if ! version=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
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
