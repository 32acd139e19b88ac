#!/bin/sh
# Benchmark `tensorctl consolidate` of a DeepSpeed ZeRO-2 checkpoint (2 ranks, 1.6 GB of fp32 master
# weights: bench/make_bench_zero.py writes it as DeepSpeed does, `make_bench_zero.py --check
# SAVE_FOLDER` compares its files with a real one) against cp of the same bytes and against
# DeepSpeed's own converter where DeepSpeed can be imported.
#
# usage: bench/bench_zero.sh [TENSORCTL]     (default: tensorctl from PATH, else build/tensorctl)
#
# Environment:
#   BENCH_N=3              repetitions of each task (the median is reported)
#   BENCH_DIR=DIR          where the checkpoint and outputs go (default: a new mktemp -d dir, removed
#                          at exit; in a given DIR only the files made here are removed)
#   BENCH_ZERO=DIR         use this ZeRO save folder instead of generating one (kept)
#   BENCH_PYTHON=PY        Python with torch for the generator (default .ci/venv/bin/python, else python3)
#   BENCH_DS_PYTHON=PY     Python that imports deepspeed, for zero_to_fp32's figures (default: BENCH_PYTHON;
#                          its rows are left out when it cannot)
#   BENCH_GEN_ARGS="..."   extra args for make_bench_zero.py ("--layers 1 --dim 512 --vocab 1000": a smoke run)
#   BENCH_DROP_CACHES=1    drop the page cache before each run (needs root; skipped otherwise)
#
# Prints a markdown table on stdout: median wall time, ratio to cp of the master weights' bytes (the
# rank files' flat groups: what consolidate reads and writes) and to cp -r of the whole step folder
# (moments and the module copy included), peak RSS (/usr/bin/time -f %M) and output size. Goals:
# consolidate at least 0.8x the throughput of cp of the same bytes, peak RSS at most 64 MiB plus its
# buffers. Not run in CI.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_n=3
if [ -x "$here/../.ci/venv/bin/python" ]; then bench_py="$here/../.ci/venv/bin/python"; else bench_py=python3; fi
bench_init tensorctl-bench-zero "${1:-}"
ds_py=${BENCH_DS_PYTHON:-$py}
ckpt=${BENCH_ZERO:-}
gen_ckpt=
cleanup() {
    rm -rf "$dir/out.pt" "$dir/out.safetensors" "$dir/out.dir" "$dir/masters.bin" "$dir/masters.copy" "$dir/ref"
    [ -n "$gen_ckpt" ] && rm -rf "$gen_ckpt"
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$ckpt" ]; then
    gen_ckpt="$dir/zero"
    ckpt=$gen_ckpt
    echo "bench: generating $ckpt" >&2
    # shellcheck disable=SC2086
    "$py" "$here/make_bench_zero.py" "$ckpt" $gen_args >&2
fi
step="$ckpt/$(cat "$ckpt/latest")"

# the bytes consolidate moves: the fp32 master weights, as one file of their size
masters=$("$tool" inspect --json "$ckpt" | "$py" -c '
import json, sys
j = json.load(sys.stdin)
print(sum(t["nbytes"] for t in j["tensors"] if "same_as" not in t))')
dd if=/dev/urandom of="$dir/masters.bin" bs=1M count=$(( (masters + 1048575) / 1048576 )) status=none

bench_run "cp (the master weights' bytes)" "$dir/masters.copy" 0 cp "$dir/masters.bin" "$dir/masters.copy"
bench_run "cp -r (the whole step folder)" "$dir/out.dir" 0 cp -r "$step" "$dir/out.dir"
bench_run "tensorctl consolidate -> .pt" "$dir/out.pt" 0 "$tool" consolidate -q "$ckpt" -o "$dir/out.pt"
bench_run "tensorctl consolidate -> .safetensors" "$dir/out.safetensors" 0 "$tool" consolidate -q "$ckpt" -o "$dir/out.safetensors"
bench_run "tensorctl consolidate --no-sync -> .pt" "$dir/out.pt" 0 "$tool" consolidate -q --no-sync "$ckpt" -o "$dir/out.pt"
bench_run "tensorctl consolidate --dtype bfloat16 -> .pt" "$dir/out.pt" 0 "$tool" consolidate -q --dtype bfloat16 "$ckpt" -o "$dir/out.pt"
if DS_ACCELERATOR=cpu "$ds_py" -c 'import deepspeed.utils.zero_to_fp32' >/dev/null 2>&1; then
    ref='import sys, torch
from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
torch.save(get_fp32_state_dict_from_zero_checkpoint(sys.argv[1]), sys.argv[2])'
    bench_run "DeepSpeed get_fp32_state_dict_from_zero_checkpoint + torch.save" "$dir/out.pt" 0 env DS_ACCELERATOR=cpu "$ds_py" -c "$ref" "$ckpt" "$dir/out.pt"
    bench_run "python + import deepspeed.utils.zero_to_fp32 only" - 0 env DS_ACCELERATOR=cpu "$ds_py" -c 'import deepspeed.utils.zero_to_fp32'
else
    echo "bench: $ds_py cannot import deepspeed: no zero_to_fp32 figures (BENCH_DS_PYTHON names one that can)" >&2
fi

size=$(du -sb "$step" | cut -f1)
bench_header "tensorctl consolidate of a DeepSpeed ZeRO-2 checkpoint" "checkpoint: $(awk -v b="$size" 'BEGIN{printf "%.2f GB", b/1e9}') in $(ls "$step" | wc -l) files, $(awk -v b="$masters" 'BEGIN{printf "%.2f GB", b/1e9}') of fp32 master weights"
awk -F'\t' "$BENCH_AWK"'
END {
    print "| task | median wall (s) | cp of the same bytes / task (throughput) | x cp -r of the step folder | peak RSS (MB) | output (MB) |"
    print "|---|---:|---:|---:|---:|---:|"
    cp = ("cp (the master weights'"'"' bytes)" in idx) ? t[idx["cp (the master weights'"'"' bytes)"]] : 0
    cpr = ("cp -r (the whole step folder)" in idx) ? t[idx["cp -r (the whole step folder)"]] : 0
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | |\n", name[i]; continue }
        thr = (cp > 0 && t[i] > 0) ? sprintf("%.2f", cp / t[i]) : "-"
        xr = (cpr > 0) ? sprintf("%.2f", t[i] / cpr) : "-"
        printf "| %s | %.2f | %s | %s | %.0f | %.1f |\n", name[i], t[i], thr, xr, m[i] / 1024, sz[i] / 1e6
    }
}' "$results"
