#!/bin/sh
# Benchmark `tensorctl scan` against picklescan and modelscan on one tree of about 1,000 model files
# holding about 10 GB (make_scan_tree.py: torch zip and legacy checkpoints, safetensors, .npy, raw
# pickles, joblib dumps, tar.gz and zip archives, a Hugging Face cache, text files; a few hostile).
#
# usage: bench/bench_scan.sh [TENSORCTL]   (default: tensorctl from PATH, else build/tensorctl)
#
# Environment:
#   BENCH_N=3              repetitions of each task (the median is reported)
#   BENCH_DIR=DIR          where the tree goes (default: a new mktemp -d dir, removed at exit)
#   BENCH_TREE=DIR         scan this tree instead (not deleted)
#   BENCH_FILES=1000       files in the generated tree
#   BENCH_GB=10            its size in GB (the big checkpoints are sparse copies: little disk)
#   BENCH_PYTHON=PY        Python with torch and numpy (joblib too, if it has it) that makes the tree
#                          (default /usr/bin/python3)
#   BENCH_PICKLESCAN=EXE   picklescan (default: picklescan on the PATH; `pip install picklescan[7z]`)
#   BENCH_MODELSCAN=EXE    modelscan (default: modelscan on the PATH; `pip install modelscan`)
#   BENCH_DROP_CACHES=1    drop the page cache before each run (needs root; skipped otherwise)
#
# Prints a markdown table: median wall time, files per second, the rate against picklescan's, peak
# RSS and exit status, and how many of the payloads planted each tool found (from one more run's
# report). A scanner that is not installed is left out, saying so. Progress goes to stderr.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_n=3
bench_py_needs='import torch, numpy'
bench_clock=precise  # a scan of the tree takes tens of milliseconds
bench_init tensorctl-bench-scan "${1:-}"
tree=${BENCH_TREE:-}
made_tree=
cleanup() {
    [ -n "$made_tree" ] && rm -rf "$made_tree"
    rm -f "$dir/report.txt"
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$tree" ]; then
    tree="$dir/tree"
    made_tree=$tree
    echo "bench: generating $tree" >&2
    made=$("$py" "$here/make_scan_tree.py" "$tree" --files "${BENCH_FILES:-1000}" --gb "${BENCH_GB:-10}")
    echo "bench: $made" >&2
    planted=$(echo "$made" | awk -F', ' '{ print $3 }')
fi
files=$(find "$tree" \( -type f -o -type l \) | wc -l)
bytes=$(find -L "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
ps=${BENCH_PICKLESCAN:-$(command -v picklescan || true)}
ms=${BENCH_MODELSCAN:-$(command -v modelscan || true)}

# tensorctl: 0 safe, 3 unreadable, 4 unsafe; picklescan: 1 when it found something; modelscan: 1
# issues found, 2 errors during the scan
bench_run "tensorctl scan" - 4 "$tool" scan -q "$tree"
bench_run "tensorctl scan --jobs 1" - 4 "$tool" scan -q --jobs 1 "$tree"
if [ -n "$ps" ]; then bench_run "picklescan" - 2 "$ps" -p "$tree"; else echo "bench: no picklescan: left out" >&2; fi
if [ -n "$ms" ]; then bench_run "modelscan" - 3 "$ms" -p "$tree"; else echo "bench: no modelscan: left out" >&2; fi

# the payloads each one found (tensorctl: files naming a global known to run code; its other
# unsafe files import globals outside the allowlist, such as joblib's and numpy's), from one more run
found() {
    case $1 in
    tensorctl) "$tool" scan --json "$tree" 2>/dev/null |
        "$py" -c 'import json, sys
n = u = 0
for line in sys.stdin:
    o = json.loads(line)
    if "summary" in o:
        continue
    u += o["verdict"] == "unsafe"
    n += any(g["dangerous"] for g in o["unsafe_globals"])
print("%d (%d unsafe in all)" % (n, u))' ;;
    picklescan) "$ps" -p "$tree" 2>&1 | awk -F: '/[Ii]nfected files/ { gsub(/ /, "", $2); print $2 }' ;;
    modelscan) "$ms" -p "$tree" 2>&1 | grep -c '^  - Source:' || true ;;
    esac
}
ut=$(found tensorctl); up=; um=
[ -n "$ps" ] && up=$(found picklescan)
[ -n "$ms" ] && um=$(found modelscan)

bench_header "tensorctl scan benchmark" \
    "tree: $files files (regular files and symlinks), $(awk -v b="$bytes" 'BEGIN{printf "%.2f GB", b/1e9}')" \
    "picklescan: ${ps:-not installed}; modelscan: ${ms:-not installed}" \
    "payloads planted: ${planted:-unknown}; found: tensorctl ${ut:-?}, picklescan ${up:--}, modelscan ${um:--}"
awk -F'\t' -v files="$files" "$BENCH_AWK"'
END {
    print "| task | median wall (s) | files/s | rate / picklescan | peak RSS (MiB) | exit |"
    print "|---|---:|---:|---:|---:|---:|"
    p = ("picklescan" in idx && !failed[idx["picklescan"]]) ? t[idx["picklescan"]] : 0
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | |\n", name[i]; continue }
        rate = t[i] > 0 ? files / t[i] : 0
        vs = (p > 0 && t[i] > 0) ? sprintf("%.1f", p / t[i]) : "-"
        printf "| %s | %.2f | %.0f | %s | %.1f | %d |\n", name[i], t[i], rate, vs, m[i] / 1024, st[i]
    }
}' "$results"
