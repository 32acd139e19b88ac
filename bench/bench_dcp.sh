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
. "$here/lib.sh"
bench_n=3
if [ -x "$here/../.ci/venv/bin/python" ]; then bench_py="$here/../.ci/venv/bin/python"; else bench_py=python3; fi
bench_py_needs='from torch.distributed.checkpoint.format_utils import dcp_to_torch_save'
bench_init tensorctl-bench-dcp "${1:-}"
ckpt=${BENCH_DCP:-}
gen_ckpt=
cleanup() {
    rm -rf "$dir/out.pt" "$dir/out.safetensors" "$dir/out.dir"
    [ -n "$gen_ckpt" ] && rm -rf "$gen_ckpt"
    bench_rm_dir
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

ref='import sys
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
dcp_to_torch_save(sys.argv[1], sys.argv[2])'

bench_run "cp -r (the folder)" "$dir/out.dir" 0 cp -r "$ckpt" "$dir/out.dir"
bench_run "cp -r + fsync" "$dir/out.dir" 0 sh -c 'cp -r "$1" "$2" && sync "$2"/*' sh "$ckpt" "$dir/out.dir"
bench_run "tensorctl consolidate -> .safetensors" "$dir/out.safetensors" 0 "$tool" consolidate -q "$ckpt" -o "$dir/out.safetensors"
bench_run "tensorctl consolidate -> .pt" "$dir/out.pt" 0 "$tool" consolidate -q "$ckpt" -o "$dir/out.pt"
bench_run "tensorctl consolidate --no-sync -> .safetensors" "$dir/out.safetensors" 0 "$tool" consolidate -q --no-sync "$ckpt" -o "$dir/out.safetensors"
bench_run "tensorctl consolidate --no-sync -> .pt" "$dir/out.pt" 0 "$tool" consolidate -q --no-sync "$ckpt" -o "$dir/out.pt"
bench_run "tensorctl consolidate --dtype bfloat16 -> .pt" "$dir/out.pt" 0 "$tool" consolidate -q --dtype bfloat16 "$ckpt" -o "$dir/out.pt"
bench_run "torch dcp_to_torch_save -> .pt" "$dir/out.pt" 0 "$py" -c "$ref" "$ckpt" "$dir/out.pt"

size=$(du -sb "$ckpt" | cut -f1)
chunks=$("$tool" inspect --json "$ckpt" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["records"]["chunks"])')
bench_header "tensorctl consolidate benchmark" "checkpoint: $(awk -v b="$size" 'BEGIN{printf "%.2f GB", b/1e9}') in $(ls "$ckpt" | wc -l) .distcp files, $chunks chunks (rows and columns)"
awk -F'\t' "$BENCH_AWK"'
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
