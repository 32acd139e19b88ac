#!/bin/sh
# Benchmark tensorctl against cp and against torch itself on a GPT-2-medium-sized checkpoint.
# (bench/bench_reflink.sh times to-cpu beside cp on XFS, where both share the input's blocks.)
#
# usage: bench/bench.sh [TENSORCTL]        (default: tensorctl from PATH, else build/tensorctl)
#
# Environment:
#   BENCH_N=5              repetitions of each task (the median is reported)
#   BENCH_DIR=DIR          where the checkpoint and outputs go (default: a new mktemp -d dir,
#                          removed at exit; in a given DIR only the files made here are removed)
#   BENCH_CKPT=FILE        use this checkpoint instead of generating one (it is not deleted)
#   BENCH_PYTHON=PY        Python with torch (default /usr/bin/python3)
#   BENCH_GEN_ARGS="..."   extra args for make_bench_ckpt.py, e.g. "--layers 2 --vocab 5000"
#                          for a quick smoke run
#   BENCH_DROP_CACHES=1    drop the page cache before each run (needs root; skipped otherwise)
#   BENCH_CUDA_TOOL=PROG   the build's tests/cast/test_cast_cuda, for the kernel bandwidth table on
#                          machines with a GPU (default: beside TENSORCTL in a build tree)
#
# Prints a markdown table on stdout: median wall time, ratio to cp, torch/tensorctl, peak RSS
# (/usr/bin/time -f %M) and output size for each task. Progress goes to stderr. Where
# `tensorctl devices` finds a usable GPU, the cast is also timed with --engine cpu and
# --engine cuda, and a table of the CUDA kernels' bandwidth follows.
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

if [ ! -x /usr/bin/time ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "bench: installing the 'time' package for /usr/bin/time" >&2
        apt-get install -y time >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y time >/dev/null 2>&1; } || true
    fi
    [ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
fi
"$py" -c 'import torch' 2>/dev/null || { echo "bench: $py cannot import torch" >&2; exit 2; }

made_dir=
if [ -n "${BENCH_DIR:-}" ]; then
    dir=$BENCH_DIR
    mkdir -p "$dir"
else
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tensorctl-bench.XXXXXX")
    made_dir=1
fi
ckpt=${BENCH_CKPT:-}
gen_ckpt=
cleanup() {
    rm -f "$dir/out.pt" "$dir/out.safetensors" "$dir/time.txt" "$dir/err.txt" "$dir/results.txt"
    [ -n "$gen_ckpt" ] && rm -f "$gen_ckpt"
    [ -n "$made_dir" ] && rm -rf "$dir"
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$ckpt" ]; then
    gen_ckpt="$dir/gpt2_medium_cuda0.pt"
    ckpt=$gen_ckpt
    echo "bench: generating $ckpt" >&2
    # shellcheck disable=SC2086
    "$py" "$here/make_bench_ckpt.py" "$ckpt" $gen_args >&2
fi

drop_caches() {
    if [ "${BENCH_DROP_CACHES:-0}" = 1 ]; then
        sync
        if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
    fi
}

results="$dir/results.txt"
: > "$results"

# bench NAME OUTFILE CMD...: N runs; appends "NAME secs... | rss... | outbytes" to $results
bench() {
    name=$1; out=$2; shift 2
    times=; rsss=; i=0
    while [ $i -lt "$n" ]; do
        rm -f "$out"
        drop_caches
        if ! /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt"; then
            echo "bench: $name failed: $(tail -n 3 "$dir/err.txt")" >&2
            rm -f "$dir/err.txt"
            printf '%s\tFAILED\n' "$name" >> "$results"
            return 0
        fi
        t=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f1)
        m=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f2)
        times="$times $t"; rsss="$rsss $m"
        i=$((i + 1))
        echo "bench: $name run $i/$n: ${t}s, ${m} KB" >&2
    done
    rm -f "$dir/err.txt"
    size=$(stat -c %s "$out" 2>/dev/null || echo 0)
    rm -f "$out"
    printf '%s\t%s\t%s\t%s\n' "$name" "$times" "$rsss" "$size" >> "$results"
}

torch_cpu='import sys, torch
torch.save(torch.load(sys.argv[1], map_location="cpu"), sys.argv[2])'
torch_cast='import sys, torch
sd = torch.load(sys.argv[1], map_location="cpu")
done = {}
def cast(v):
    if not (torch.is_tensor(v) and v.is_floating_point()):
        return v
    key = (v.data_ptr(), v.storage_offset(), tuple(v.shape), tuple(v.stride()))
    if key not in done:  # keep tied weights tied
        done[key] = v.to(torch.bfloat16)
    return done[key]
torch.save({k: cast(v) for k, v in sd.items()}, sys.argv[2])'

bench "cp" "$dir/out.pt" cp "$ckpt" "$dir/out.pt"
# tensorctl fsyncs its output before renaming it into place; this is cp made as durable
bench "cp + fsync" "$dir/out.pt" sh -c 'cp "$1" "$2" && sync "$2"' sh "$ckpt" "$dir/out.pt"
bench "tensorctl to-cpu" "$dir/out.pt" "$tool" to-cpu "$ckpt" -o "$dir/out.pt"
bench "torch load+save" "$dir/out.pt" "$py" -c "$torch_cpu" "$ckpt" "$dir/out.pt"
bench "tensorctl to-cpu --dtype bfloat16" "$dir/out.pt" "$tool" to-cpu --dtype bfloat16 "$ckpt" -o "$dir/out.pt"
bench "torch load+bf16+save" "$dir/out.pt" "$py" -c "$torch_cast" "$ckpt" "$dir/out.pt"
gpu=
if "$tool" devices -q; then
    # with a GPU, the default engine (auto) is the GPU: time both explicitly
    gpu=1
    bench "tensorctl to-cpu --dtype bfloat16 --engine cpu" "$dir/out.pt" "$tool" to-cpu --dtype bfloat16 --engine cpu "$ckpt" -o "$dir/out.pt"
    bench "tensorctl to-cpu --dtype bfloat16 --engine cuda" "$dir/out.pt" "$tool" to-cpu --dtype bfloat16 --engine cuda "$ckpt" -o "$dir/out.pt"
fi
if "$tool" convert --help >/dev/null 2>&1; then
    bench "tensorctl convert safetensors" "$dir/out.safetensors" "$tool" convert "$ckpt" "$dir/out.safetensors"
else
    echo "bench: $tool has no 'convert' command; safetensors row skipped" >&2
fi

ckpt_size=$(stat -c %s "$ckpt")
echo "## tensorctl benchmark"
echo
echo "- checkpoint: $(basename "$ckpt"), $(awk -v b="$ckpt_size" 'BEGIN{printf "%.2f GB", b/1e9}'), storages tagged cuda:0"
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
{ name[NR] = $1; failed[NR] = ($2 == "FAILED"); if (!failed[NR]) { t[NR] = median($2); m[NR] = median($3); sz[NR] = $4 } ; idx[$1] = NR }
END {
    print "| task | median wall (s) | x cp | x cp + fsync | torch / tensorctl | peak RSS (MB) | output (MB) |"
    print "|---|---:|---:|---:|---:|---:|---:|"
    cp = ("cp" in idx && !failed[idx["cp"]]) ? t[idx["cp"]] : 0
    cps = ("cp + fsync" in idx && !failed[idx["cp + fsync"]]) ? t[idx["cp + fsync"]] : 0
    pair["torch load+save"] = "tensorctl to-cpu"
    pair["torch load+bf16+save"] = "tensorctl to-cpu --dtype bfloat16"
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | | |\n", name[i]; continue }
        xcp = (cp > 0) ? sprintf("%.2f", t[i] / cp) : "-"
        xcps = (cps > 0) ? sprintf("%.2f", t[i] / cps) : "-"
        vs = "-"
        if (name[i] in pair && (pair[name[i]] in idx)) {
            j = idx[pair[name[i]]]
            if (!failed[j] && t[j] > 0) vs = sprintf("%.2f", t[i] / t[j])
        }
        printf "| %s | %.2f | %s | %s | %s | %.0f | %.1f |\n", name[i], t[i], xcp, xcps, vs, m[i] / 1024, sz[i] / 1e6
    }
}' "$results"

if [ -n "$gpu" ]; then
    # the cast kernels alone, against the device's own copy bandwidth
    kb=${BENCH_CUDA_TOOL:-$(dirname "$tool")/tests/cast/test_cast_cuda}
    echo
    "$tool" devices | sed 's/^/- /'
    echo
    if [ -x "$kb" ]; then "$kb" --bench | grep '^|'
    else echo "(no $kb: set BENCH_CUDA_TOOL to the build's tests/cast/test_cast_cuda for the kernel table)"
    fi
fi
