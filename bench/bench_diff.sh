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
tool=${1:-}
if [ -z "$tool" ]; then
    if command -v tensorctl >/dev/null 2>&1; then tool=$(command -v tensorctl)
    elif [ -x "$here/../build/tensorctl" ]; then tool="$here/../build/tensorctl"
    else echo "bench: no tensorctl given and none found (pass its path)" >&2; exit 2
    fi
fi
n=${BENCH_N:-5}
py=${BENCH_PYTHON:-/usr/bin/python3}
gen_args=${BENCH_GEN_ARGS:-}

[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "bench: $py cannot import torch" >&2; exit 2; }

made_dir=
if [ -n "${BENCH_DIR:-}" ]; then
    dir=$BENCH_DIR
    mkdir -p "$dir"
else
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tensorctl-bench-diff.XXXXXX")
    made_dir=1
fi
a=${BENCH_CKPT:-}
b=${BENCH_CKPT_B:-}
gen=
cleanup() {
    rm -f "$dir/time.txt" "$dir/err.txt" "$dir/results.txt"
    [ -n "$gen" ] && rm -f $gen && rmdir "$dir/a" "$dir/b" 2>/dev/null
    [ -n "$made_dir" ] && rm -rf "$dir"
    return 0
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

drop_caches() {
    if [ "${BENCH_DROP_CACHES:-0}" = 1 ]; then
        sync
        if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
    fi
}

results="$dir/results.txt"
: > "$results"

# bench NAME CMD...: N runs (exit status 0 or 1 both count: 1 is "different");
# appends "NAME<TAB>secs...<TAB>rss...<TAB>status" to $results
bench() {
    name=$1; shift
    times=; rsss=; i=0; st=0
    # a first, untimed run warms the page cache for both files
    "$@" >/dev/null 2>&1 || true
    while [ $i -lt "$n" ]; do
        drop_caches
        st=0
        /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt" || st=$?
        if [ "$st" -gt 1 ]; then
            echo "bench: $name failed (exit $st): $(tail -n 3 "$dir/err.txt")" >&2
            printf '%s\tFAILED\n' "$name" >> "$results"
            return 0
        fi
        t=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f1)
        m=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f2)
        times="$times $t"; rsss="$rsss $m"
        i=$((i + 1))
        echo "bench: $name run $i/$n: ${t}s, ${m} KB, exit $st" >&2
    done
    printf '%s\t%s\t%s\t%s\n' "$name" "$times" "$rsss" "$st" >> "$results"
}

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

bench "cmp" cmp "$a" "$b"
bench "tensorctl diff" "$tool" diff "$a" "$b"
bench "tensorctl diff --threads 1" "$tool" diff --threads 1 "$a" "$b"
bench "torch load both + compare" "$py" -c "$torch_diff" "$a" "$b"

size=$(stat -c %s "$a")
echo "## tensorctl diff benchmark"
echo
echo "- A: $(basename "$a"), $(awk -v b="$size" 'BEGIN{printf "%.2f GB", b/1e9}'); B: the same with one element changed, in the record written last"
echo "- $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "- torch $("$py" -c 'import torch; print(torch.__version__)'), tensorctl: $tool"
echo "- $n runs each after one untimed run, median reported; page cache $( [ "${BENCH_DROP_CACHES:-0}" = 1 ] && [ -w /proc/sys/vm/drop_caches ] && echo dropped before each run || echo warm)"
echo
awk -F'\t' '
function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    if (k == 0) return 0
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{ name[NR] = $1; failed[NR] = ($2 == "FAILED"); if (!failed[NR]) { t[NR] = median($2); m[NR] = median($3); st[NR] = $4 }; idx[$1] = NR }
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
