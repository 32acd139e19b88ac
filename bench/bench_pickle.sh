#!/bin/sh
# The pickle reader's cost (memo, dict keys, value ids) and the contents it describes, measured as
# instructions under callgrind: repeatable on a loaded machine, where wall times are not.
#
# usage: bench/bench_pickle.sh [TENSORCTL [BASELINE]]   (default: tensorctl from PATH, else build/tensorctl)
#
# Runs `inspect --json` on pickle-heavy shapes of tests/complexity/complexity.py, written at
# BENCH_SCALE (default 8) times the size its tests use: a vocabulary memoized by MEMOIZE and by
# BINPUT, many small objects, a top-level dict of tensors and ints, many views of one storage,
# many keys to rename. Prints a markdown table: instructions per shape, and with BASELINE (another
# tensorctl binary) its count and the ratio. Needs valgrind.
#
# Environment:
#   BENCH_SCALE=8     size of the shapes, as complexity.py gen --scale
#   BENCH_DIR=DIR     where the shapes go (default: a new mktemp -d dir, removed at exit)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bench_py_needs=
. "$here/lib.sh"
bench_init tensorctl-bench-pickle "${1:-}"
base=${2:-}
trap 'exit 130' INT TERM
command -v valgrind >/dev/null 2>&1 || { echo "bench: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }

cases="vocab_p4_memoize vocab_p2_binput many_small_objects top_level_mixed views_one_storage rekey_many_keys"
gen=
for c in $cases; do gen="$gen --case $c"; done
echo "bench: writing the shapes at scale ${BENCH_SCALE:-8} in $dir" >&2
cleanup() {
    for c in $cases; do rm -rf "${dir:?}/$c"; done
    bench_rm_dir
}
trap cleanup EXIT
# shellcheck disable=SC2086
python3 "$here/../tests/complexity/complexity.py" gen "$dir" $gen --scale "${BENCH_SCALE:-8}" >/dev/null

# instructions T takes for inspect --json FILE
instructions() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" inspect --json "$2" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "## pickle reader (instructions, callgrind)"
echo
echo "- inspect --json of complexity.py's shapes at scale ${BENCH_SCALE:-8}; one run each (instruction counts repeat)"
echo "- $(uname -srm), $(nproc) CPUs; tensorctl: $tool${base:+; baseline: $base}"
echo
if [ -n "$base" ]; then
    echo "| shape | input | tensorctl | baseline | ratio |"
    echo "|---|---:|---:|---:|---:|"
else
    echo "| shape | input | tensorctl |"
    echo "|---|---:|---:|"
fi
for c in $cases; do
    f="$dir/$c/in.pt"
    size=$(wc -c <"$f")
    echo "bench: $c" >&2
    ir=$(instructions "$tool" "$f")
    if [ -n "$base" ]; then
        ib=$(instructions "$base" "$f")
        echo "| $c | $size | $ir | $ib | $(awk "BEGIN { printf \"%.3f\", $ir / $ib }") |"
    else
        echo "| $c | $size | $ir |"
    fi
done
