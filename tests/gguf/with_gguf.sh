#!/bin/sh
# Run a Python script with the first interpreter here that imports gguf-py (gguf) and numpy:
#   $TENSORCTL_TEST_PYTHON (if set), each entry of the colon-separated $TENSORCTL_EXTRA_PYTHONS,
#   then /usr/bin/python3 and python3.
# usage: tests/gguf/with_gguf.sh SCRIPT [ARGS...]
# Exit: the script's status; 77 (meson's "skipped"), saying so, when no interpreter has gguf
# (CI installs it with the newer torch: pip install gguf).
set -u
if [ $# -lt 1 ]; then
    echo "usage: $0 SCRIPT [ARGS...]" >&2
    exit 2
fi
old_ifs=$IFS
IFS=:
for py in ${TENSORCTL_TEST_PYTHON:-} ${TENSORCTL_EXTRA_PYTHONS:-} /usr/bin/python3 python3; do
    IFS=$old_ifs
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || continue
    if version=$("$py" -c 'import gguf, numpy, importlib.metadata as m; print(m.version("gguf"))' 2>/dev/null); then
        echo "with_gguf: $py (gguf $version): $*"
        exec "$py" "$@"
    fi
done
echo "with_gguf: SKIP: no Python with gguf-py here (pip install gguf numpy; tried TENSORCTL_TEST_PYTHON, TENSORCTL_EXTRA_PYTHONS, /usr/bin/python3, python3)"
exit 77
