#!/bin/sh
# Benchmark `tensorctl diff` against cmp and against torch loading both files and comparing them,
# on the GPT-2-medium-sized checkpoint of bench.sh and a copy of it with one element changed.
#
# usage: bench/bench_diff.sh [TENSORCTL]   (default: tensorctl from PATH, else build/tensorctl)
#
# Environment:
#   BENCH_N=5              repetitions of each task (the median is reported)
#   BENCH_DIR=DIR          where the checkpoints go (default: a new mktemp -d dir, removed at exit;
#                          in a given DIR only the files made here are removed)
#   BENCH_CKPT=FILE        use this checkpoint as A (not deleted) ...
#   BENCH_CKPT_B=FILE      ... and this one as B (not deleted); both are generated when unset
#   BENCH_PYTHON=PY        Python with torch (default /usr/bin/python3)
#   BENCH_GEN_ARGS="..."   extra args for make_bench_ckpt.py, e.g. "--layers 2 --vocab 5000"
#                          for a quick smoke run
#   BENCH_DROP_CACHES=1    drop the page cache before each run (needs root; skipped otherwise)
#
# B is A with one element changed, in the record torch writes last (make_bench_ckpt.py --change-one):
# so cmp, which stops at the first differing byte, reads nearly all of both
# files. Prints a markdown table on stdout: median wall time, ratio to cmp, torch / tensorctl, peak
# RSS (/usr/bin/time -f %M) and exit status of each task. Progress goes to stderr.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_init tensorctl-bench-diff "${1:-}"
a=${BENCH_CKPT:-}
b=${BENCH_CKPT_B:-}
gen=
cleanup() {
    # shellcheck disable=SC2086
    [ -n "$gen" ] && rm -f $gen && rmdir "$dir/a" "$dir/b" 2>/dev/null
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# torch names the zip's top folder after the file: B keeps A's name, in a folder of its own, so
# that the two files differ only in the changed element and its record's CRC-32
if [ -z "$a" ]; then
    mkdir -p "$dir/a"
    a="$dir/a/gpt2_medium_cuda0.pt"
    gen="$gen $a"
    echo "bench: generating $a" >&2
    # shellcheck disable=SC2086
    "$py" "$here/make_bench_ckpt.py" "$a" $gen_args >&2
fi
if [ -z "$b" ]; then
    mkdir -p "$dir/b"
    b="$dir/b/$(basename "$a")"
    gen="$gen $b"
    echo "bench: generating $b (one element changed)" >&2
    # shellcheck disable=SC2086
    "$py" "$here/make_bench_ckpt.py" "$b" --change-one $gen_args >&2
fi

torch_diff='import sys, torch
a = torch.load(sys.argv[1], map_location="cpu")
b = torch.load(sys.argv[2], map_location="cpu")
differ = 0
for k in list(a) + [k for k in b if k not in a]:
    if k not in a or k not in b or a[k].shape != b[k].shape:
        differ += 1
    elif not torch.equal(a[k], b[k]):
        differ += 1
        d = (a[k].double() - b[k].double()).abs()
        print(k, int((d > 0).sum()), d.max().item())
sys.exit(1 if differ else 0)'

bench_run "cmp" - 1 cmp "$a" "$b"
bench_run "tensorctl diff" - 1 "$tool" diff "$a" "$b"
bench_run "tensorctl diff --threads 1" - 1 "$tool" diff --threads 1 "$a" "$b"
bench_run "torch load both + compare" - 1 "$py" -c "$torch_diff" "$a" "$b"

size=$(stat -c %s "$a")
bench_header "tensorctl diff benchmark" "A: $(basename "$a"), $(awk -v b="$size" 'BEGIN{printf "%.2f GB", b/1e9}'); B: the same with one element changed, in the record written last"
awk -F'\t' "$BENCH_AWK"'
END {
    print "| task | median wall (s) | x cmp | torch / task | peak RSS (MiB) | exit |"
    print "|---|---:|---:|---:|---:|---:|"
    c = ("cmp" in idx && !failed[idx["cmp"]]) ? t[idx["cmp"]] : 0
    tr = ("torch load both + compare" in idx && !failed[idx["torch load both + compare"]]) ? t[idx["torch load both + compare"]] : 0
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | |\n", name[i]; continue }
        xc = (c > 0) ? sprintf("%.2f", t[i] / c) : "-"
        vs = (tr > 0 && t[i] > 0 && name[i] != "torch load both + compare") ? sprintf("%.1f", tr / t[i]) : "-"
        printf "| %s | %.2f | %s | %s | %.1f | %d |\n", name[i], t[i], xc, vs, m[i] / 1024, st[i]
    }
}' "$results"
