#!/bin/sh
# Benchmark `tensorctl consolidate` against torch's own dcp_to_torch_save and against cp of the same
# bytes, on a distributed checkpoint of about 1.2 GB written by real torch (make_bench_dcp.py).
#
# usage: bench/bench_dcp.sh [TENSORCTL]     (default: tensorctl from PATH, else build/tensorctl)
#
# Environment:
#   BENCH_N=3              repetitions of each task (the median is reported)
#   BENCH_DIR=DIR          where the checkpoint and outputs go (default: a new mktemp -d dir, removed
#                          at exit; in a given DIR only the files made here are removed)
#   BENCH_DCP=DIR          use this distributed checkpoint instead of generating one (kept)
#   BENCH_PYTHON=PY        Python with torch 2.x (torch.distributed.checkpoint), default
#                          .ci/venv/bin/python, else python3
#   BENCH_GEN_ARGS="..."   extra args for make_bench_dcp.py ("--layers 1 --vocab 4000": a smoke run)
#   BENCH_DROP_CACHES=1    drop the page cache before each run (needs root; skipped otherwise)
#
# Prints a markdown table on stdout: median wall time, ratio to cp -r of the checkpoint's folder,
# dcp_to_torch_save / tensorctl, peak RSS (/usr/bin/time -f %M) and output size. Not run in CI.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
tool=${1:-}
if [ -z "$tool" ]; then
    if command -v tensorctl >/dev/null 2>&1; then tool=$(command -v tensorctl)
    elif [ -x "$here/../build/tensorctl" ]; then tool="$here/../build/tensorctl"
    else echo "bench: no tensorctl given and none found (pass its path)" >&2; exit 2
    fi
fi
n=${BENCH_N:-3}
py=${BENCH_PYTHON:-}
if [ -z "$py" ]; then
    if [ -x "$here/../.ci/venv/bin/python" ]; then py="$here/../.ci/venv/bin/python"; else py=python3; fi
fi
gen_args=${BENCH_GEN_ARGS:-}
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
"$py" -c 'from torch.distributed.checkpoint.format_utils import dcp_to_torch_save' 2>/dev/null ||
    { echo "bench: $py has no torch 2.x with torch.distributed.checkpoint" >&2; exit 2; }

made_dir=
if [ -n "${BENCH_DIR:-}" ]; then
    dir=$BENCH_DIR
    mkdir -p "$dir"
else
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tensorctl-bench-dcp.XXXXXX")
    made_dir=1
fi
ckpt=${BENCH_DCP:-}
gen_ckpt=
cleanup() {
    rm -rf "$dir/out.pt" "$dir/out.safetensors" "$dir/out.dir" "$dir/time.txt" "$dir/err.txt" "$dir/results.txt"
    [ -n "$gen_ckpt" ] && rm -rf "$gen_ckpt"
    [ -n "$made_dir" ] && rm -rf "$dir"
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$ckpt" ]; then
    gen_ckpt="$dir/dcp"
    ckpt=$gen_ckpt
    echo "bench: generating $ckpt" >&2
    # shellcheck disable=SC2086
    "$py" "$here/make_bench_dcp.py" "$ckpt" $gen_args >&2 2>/dev/null
fi

drop_caches() {
    if [ "${BENCH_DROP_CACHES:-0}" = 1 ]; then
        sync
        if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
    fi
}

results="$dir/results.txt"
: > "$results"

# bench NAME OUT CMD...: N runs; appends "NAME secs... | rss... | outbytes" to $results
bench() {
    name=$1; out=$2; shift 2
    times=; rsss=; i=0
    while [ $i -lt "$n" ]; do
        rm -rf "$out"
        drop_caches
        if ! /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt"; then
            echo "bench: $name failed: $(tail -n 3 "$dir/err.txt")" >&2
            printf '%s\tFAILED\n' "$name" >> "$results"
            return 0
        fi
        t=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f1)
        m=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f2)
        times="$times $t"; rsss="$rsss $m"
        i=$((i + 1))
        echo "bench: $name run $i/$n: ${t}s, ${m} KB" >&2
    done
    size=$(du -sb "$out" 2>/dev/null | cut -f1)
    rm -rf "$out"
    printf '%s\t%s\t%s\t%s\n' "$name" "$times" "$rsss" "${size:-0}" >> "$results"
}

ref='import sys
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
dcp_to_torch_save(sys.argv[1], sys.argv[2])'

bench "cp -r (the folder)" "$dir/out.dir" cp -r "$ckpt" "$dir/out.dir"
bench "cp -r + fsync" "$dir/out.dir" sh -c 'cp -r "$1" "$2" && sync "$2"/*' sh "$ckpt" "$dir/out.dir"
bench "tensorctl consolidate -> .safetensors" "$dir/out.safetensors" "$tool" consolidate -q "$ckpt" -o "$dir/out.safetensors"
bench "tensorctl consolidate -> .pt" "$dir/out.pt" "$tool" consolidate -q "$ckpt" -o "$dir/out.pt"
bench "tensorctl consolidate --dtype bfloat16 -> .pt" "$dir/out.pt" "$tool" consolidate -q --dtype bfloat16 "$ckpt" -o "$dir/out.pt"
bench "torch dcp_to_torch_save -> .pt" "$dir/out.pt" "$py" -c "$ref" "$ckpt" "$dir/out.pt"

size=$(du -sb "$ckpt" | cut -f1)
chunks=$("$tool" inspect --json "$ckpt" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["records"]["chunks"])')
echo "## tensorctl consolidate benchmark"
echo
echo "- checkpoint: $(awk -v b="$size" 'BEGIN{printf "%.2f GB", b/1e9}') in $(ls "$ckpt" | wc -l) .distcp files, $chunks chunks (rows and columns)"
echo "- $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
echo "- torch $("$py" -c 'import torch; print(torch.__version__)'), tensorctl: $tool"
echo "- $n runs each, median reported; page cache $( [ "${BENCH_DROP_CACHES:-0}" = 1 ] && [ -w /proc/sys/vm/drop_caches ] && echo dropped before each run || echo warm)"
echo
awk -F'\t' '
function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    if (k == 0) return 0
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{ name[NR] = $1; failed[NR] = ($2 == "FAILED"); if (!failed[NR]) { t[NR] = median($2); m[NR] = median($3); sz[NR] = $4 }; idx[$1] = NR }
END {
    print "| task | median wall (s) | x cp -r | cp -r / task (throughput) | torch / tensorctl | peak RSS (MB) | output (MB) |"
    print "|---|---:|---:|---:|---:|---:|---:|"
    cp = ("cp -r (the folder)" in idx && !failed[idx["cp -r (the folder)"]]) ? t[idx["cp -r (the folder)"]] : 0
    ref = ("torch dcp_to_torch_save -> .pt" in idx) ? idx["torch dcp_to_torch_save -> .pt"] : 0
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | | |\n", name[i]; continue }
        xcp = (cp > 0) ? sprintf("%.2f", t[i] / cp) : "-"
        thr = (cp > 0 && t[i] > 0) ? sprintf("%.2f", cp / t[i]) : "-"
        vs = (ref && !failed[ref] && t[i] > 0 && name[i] ~ /^tensorctl/) ? sprintf("%.2f", t[ref] / t[i]) : "-"
        printf "| %s | %.2f | %s | %s | %s | %.0f | %.1f |\n", name[i], t[i], xcp, thr, vs, m[i] / 1024, sz[i] / 1e6
    }
}' "$results"
