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
. "$here/lib.sh"
bench_init tensorctl-bench "${1:-}"
cleanup() {
    rm -f "$dir/out.pt" "$dir/out.safetensors"
    [ -n "$gen_ckpt" ] && rm -f "$gen_ckpt"
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_gpt2_ckpt

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

bench_run "cp" "$dir/out.pt" 0 cp "$ckpt" "$dir/out.pt"
# tensorctl fsyncs its output before renaming it into place; this is cp made as durable
bench_run "cp + fsync" "$dir/out.pt" 0 sh -c 'cp "$1" "$2" && sync "$2"' sh "$ckpt" "$dir/out.pt"
bench_run "tensorctl to-cpu" "$dir/out.pt" 0 "$tool" to-cpu "$ckpt" -o "$dir/out.pt"
bench_run "tensorctl to-cpu --no-sync" "$dir/out.pt" 0 "$tool" to-cpu --no-sync "$ckpt" -o "$dir/out.pt"
bench_run "torch load+save" "$dir/out.pt" 0 "$py" -c "$torch_cpu" "$ckpt" "$dir/out.pt"
bench_run "tensorctl to-cpu --dtype bfloat16" "$dir/out.pt" 0 "$tool" to-cpu --dtype bfloat16 "$ckpt" -o "$dir/out.pt"
bench_run "torch load+bf16+save" "$dir/out.pt" 0 "$py" -c "$torch_cast" "$ckpt" "$dir/out.pt"
gpu=
if "$tool" devices -q; then
    # with a GPU, the default engine (auto) is the GPU: time both explicitly
    gpu=1
    bench_run "tensorctl to-cpu --dtype bfloat16 --engine cpu" "$dir/out.pt" 0 "$tool" to-cpu --dtype bfloat16 --engine cpu "$ckpt" -o "$dir/out.pt"
    bench_run "tensorctl to-cpu --dtype bfloat16 --engine cuda" "$dir/out.pt" 0 "$tool" to-cpu --dtype bfloat16 --engine cuda "$ckpt" -o "$dir/out.pt"
fi
if "$tool" convert --help >/dev/null 2>&1; then
    bench_run "tensorctl convert safetensors" "$dir/out.safetensors" 0 "$tool" convert "$ckpt" "$dir/out.safetensors"
else
    echo "bench: $tool has no 'convert' command; safetensors row skipped" >&2
fi

ckpt_size=$(stat -c %s "$ckpt")
bench_header "tensorctl benchmark" "checkpoint: $(basename "$ckpt"), $(awk -v b="$ckpt_size" 'BEGIN{printf "%.2f GB", b/1e9}'), storages tagged cuda:0"
awk -F'\t' "$BENCH_AWK"'
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
