#!/bin/sh
# Run a Python script with the first interpreter here that imports every module named:
#   $TENSORCTL_TEST_PYTHON (if set), each entry of the colon-separated $TENSORCTL_EXTRA_PYTHONS,
#   then /usr/bin/python3 and python3.
# usage: tests/gguf/with_python.sh "MODULE..." SCRIPT [ARGS...]   (e.g. "gguf numpy")
# Exit: the script's status; 77 (meson's "skipped"), saying so, when no interpreter has them
# (CI installs gguf beside the newer torch: pip install gguf).
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 \"MODULE...\" SCRIPT [ARGS...]" >&2
    exit 2
fi
mods=$1
shift
imports=$(echo "$mods" | sed 's/  */, /g')
old_ifs=$IFS
IFS=:
for py in ${TENSORCTL_TEST_PYTHON:-} ${TENSORCTL_EXTRA_PYTHONS:-} /usr/bin/python3 python3; do
    IFS=$old_ifs
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c "import $imports" 2>/dev/null; then
        echo "with_python: $py ($mods): $*"
        exec "$py" "$@"
    fi
done
echo "with_python: SKIP: no Python here imports $mods (pip install $mods; tried TENSORCTL_TEST_PYTHON, TENSORCTL_EXTRA_PYTHONS, /usr/bin/python3, python3)"
exit 77
