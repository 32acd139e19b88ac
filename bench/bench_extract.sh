#!/bin/sh
# extract against cp: the bench checkpoint's weights (~1.4 GB, bench/make_bench_ckpt.py) wrapped in a
# training checkpoint with an optimizer state as large again (bench/make_train_ckpt.py), and the weights
# taken out with tensorctl extract, timed against cp of a file of the weights' bytes (the plain bench
# checkpoint) and against torch doing the same job.
#
# usage: bench/bench_extract.sh [TENSORCTL]     (default: tensorctl from PATH, else build/tensorctl)
#
# Environment: BENCH_N (5 runs, the median reported), BENCH_DIR (where the files go; default a new
# mktemp -d folder, removed at exit), BENCH_PYTHON (a Python with torch, default /usr/bin/python3),
# BENCH_GEN_ARGS (e.g. "--layers 2 --vocab 5000" for a quick smoke run), BENCH_NO_TORCH=1 (skip the
# torch row, which needs twice the checkpoint in memory).
#
# Prints a markdown table on stdout: median wall time, ratio to cp and to cp + fsync (tensorctl
# fsyncs its output before renaming it into place), peak RSS (/usr/bin/time -f %M) and output size.
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
if [ -n "${BENCH_DIR:-}" ]; then dir=$BENCH_DIR; mkdir -p "$dir"
else dir=$(mktemp -d "${TMPDIR:-/tmp}/tensorctl-bench-extract.XXXXXX"); made_dir=1
fi
weights="$dir/weights_cuda0.pt"
train="$dir/train_cuda0.pt"
cleanup() {
    rm -f "$dir/out.pt" "$dir/out.safetensors" "$dir/time.txt" "$dir/err.txt" "$dir/results.txt" "$weights" "$train"
    [ -n "$made_dir" ] && rm -rf "$dir"
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench: generating $weights and $train" >&2
# shellcheck disable=SC2086
"$py" "$here/make_bench_ckpt.py" "$weights" $gen_args >&2
# shellcheck disable=SC2086
"$py" "$here/make_train_ckpt.py" "$train" $gen_args >&2

results="$dir/results.txt"
: > "$results"
bench() { # NAME OUTFILE CMD...: N runs; appends "NAME secs | rss | outbytes"
    name=$1; out=$2; shift 2
    times=; rsss=; i=0
    while [ $i -lt "$n" ]; do
        rm -f "$out"
        if ! /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt"; then
            echo "bench: $name failed: $(tail -n 3 "$dir/err.txt")" >&2
            printf '%s\tFAILED\n' "$name" >> "$results"
            return 0
        fi
        t=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f1); m=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f2)
        times="$times $t"; rsss="$rsss $m"; i=$((i + 1))
        echo "bench: $name run $i/$n: ${t}s, ${m} KB" >&2
    done
    size=$(stat -c %s "$out" 2>/dev/null || echo 0)
    rm -f "$out"
    printf '%s\t%s\t%s\t%s\n' "$name" "$times" "$rsss" "$size" >> "$results"
}

torch_extract='import sys, torch
ck = torch.load(sys.argv[1], map_location="cpu")
torch.save(ck["state_dict"], sys.argv[2])'

bench "cp (the weights' bytes)" "$dir/out.pt" cp "$weights" "$dir/out.pt"
bench "cp + fsync" "$dir/out.pt" sh -c 'cp "$1" "$2" && sync "$2"' sh "$weights" "$dir/out.pt"
bench "tensorctl extract -> .pt" "$dir/out.pt" "$tool" extract -q "$train" -o "$dir/out.pt"
bench "tensorctl extract -> .safetensors" "$dir/out.safetensors" "$tool" extract -q "$train" -o "$dir/out.safetensors"
[ "${BENCH_NO_TORCH:-0}" = 1 ] || bench "torch load + save state_dict" "$dir/out.pt" "$py" -c "$torch_extract" "$train" "$dir/out.pt"

echo "## tensorctl extract benchmark"
echo
echo "- input: $(basename "$train"), $(awk -v b="$(stat -c %s "$train")" 'BEGIN{printf "%.2f GB", b/1e9}'): the weights ($(awk -v b="$(stat -c %s "$weights")" 'BEGIN{printf "%.2f GB", b/1e9}')) and an optimizer state as large, tagged cuda:0"
echo "- $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo); torch $("$py" -c 'import torch; print(torch.__version__)')"
echo "- $n runs each, median reported; page cache warm"
echo
awk -F'\t' '
function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k ? ((k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2) : 0
}
{ name[NR] = $1; failed[NR] = ($2 == "FAILED"); if (!failed[NR]) { t[NR] = median($2); m[NR] = median($3); sz[NR] = $4 } }
END {
    print "| task | median wall (s) | x cp | x cp + fsync | peak RSS (MB) | output (MB) |"
    print "|---|---:|---:|---:|---:|---:|"
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | |\n", name[i]; continue }
        printf "| %s | %.2f | %.2f | %.2f | %.0f | %.1f |\n", name[i], t[i], t[i] / t[1], t[i] / t[2], m[i] / 1024, sz[i] / 1e6
    }
}' "$results"
