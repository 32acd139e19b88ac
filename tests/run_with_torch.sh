#!/bin/sh
# Run a Python script under every interpreter here that can import torch:
#   $TENSORCTL_TEST_PYTHON (if set), /usr/bin/python3, and each entry of the colon-separated
#   $TENSORCTL_EXTRA_PYTHONS.
# usage: tests/run_with_torch.sh SCRIPT [ARGS...]
# Exit 0 when every run passed, 77 (meson's "skipped") when no interpreter has torch, otherwise
# the first failing run's status (1 if that was 77 from a script whose torch half-works).
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 SCRIPT [ARGS...]" >&2
    exit 2
fi

candidates="${TENSORCTL_TEST_PYTHON:-}:/usr/bin/python3:${TENSORCTL_EXTRA_PYTHONS:-}"
seen=":"
ran=0
status=0
old_ifs=$IFS
IFS=:
for py in $candidates; do
    IFS=$old_ifs
    [ -n "$py" ] || continue
    case "$seen" in *":$py:"*) continue ;; esac
    seen="$seen$py:"
    if ! command -v "$py" >/dev/null 2>&1; then
        echo "run_with_torch: $py: not found, skipped" >&2
        continue
    fi
    if ! version=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
        echo "run_with_torch: $py: cannot import torch, skipped" >&2
        continue
    fi
    echo "run_with_torch: $py (torch $version): $*"
    ran=$((ran + 1))
    "$py" "$@"
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "run_with_torch: $py (torch $version): exit $rc" >&2
        if [ $status -eq 0 ]; then
            if [ $rc -eq 77 ]; then status=1; else status=$rc; fi
        fi
    fi
done
IFS=$old_ifs

if [ $ran -eq 0 ]; then
    echo "run_with_torch: no Python with torch (tried: $candidates); skipping" >&2
    exit 77
fi
exit $status
