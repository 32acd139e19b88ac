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
# torch row, which needs twice the checkpoint in memory), BENCH_DROP_CACHES=1 (drop the page cache
# before each run; needs root, skipped otherwise).
#
# Prints a markdown table on stdout: median wall time, ratio to cp and to cp + fsync (tensorctl
# fsyncs its output before renaming it into place unless given --no-sync, so the like-for-like
# pairs are cp + fsync / extract and cp / extract --no-sync), peak RSS (/usr/bin/time -f %M) and output size.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_init tensorctl-bench-extract "${1:-}"
weights="$dir/weights_cuda0.pt"
train="$dir/train_cuda0.pt"
cleanup() {
    rm -f "$dir/out.pt" "$dir/out.safetensors" "$weights" "$train"
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench: generating $weights and $train" >&2
# shellcheck disable=SC2086
"$py" "$here/make_bench_ckpt.py" "$weights" $gen_args >&2
# shellcheck disable=SC2086
"$py" "$here/make_train_ckpt.py" "$train" $gen_args >&2

torch_extract='import sys, torch
ck = torch.load(sys.argv[1], map_location="cpu")
torch.save(ck["state_dict"], sys.argv[2])'

bench_run "cp (the weights' bytes)" "$dir/out.pt" 0 cp "$weights" "$dir/out.pt"
bench_run "cp + fsync" "$dir/out.pt" 0 sh -c 'cp "$1" "$2" && sync "$2"' sh "$weights" "$dir/out.pt"
bench_run "tensorctl extract -> .pt" "$dir/out.pt" 0 "$tool" extract -q "$train" -o "$dir/out.pt"
bench_run "tensorctl extract -> .safetensors" "$dir/out.safetensors" 0 "$tool" extract -q "$train" -o "$dir/out.safetensors"
bench_run "tensorctl extract --no-sync -> .pt" "$dir/out.pt" 0 "$tool" extract -q --no-sync "$train" -o "$dir/out.pt"
bench_run "tensorctl extract --no-sync -> .safetensors" "$dir/out.safetensors" 0 "$tool" extract -q --no-sync "$train" -o "$dir/out.safetensors"
[ "${BENCH_NO_TORCH:-0}" = 1 ] || bench_run "torch load + save state_dict" "$dir/out.pt" 0 "$py" -c "$torch_extract" "$train" "$dir/out.pt"

bench_header "tensorctl extract benchmark" "input: $(basename "$train"), $(awk -v b="$(stat -c %s "$train")" 'BEGIN{printf "%.2f GB", b/1e9}'): the weights ($(awk -v b="$(stat -c %s "$weights")" 'BEGIN{printf "%.2f GB", b/1e9}')) and an optimizer state as large, tagged cuda:0"
awk -F'\t' "$BENCH_AWK"'
END {
    print "| task | median wall (s) | x cp | x cp + fsync | peak RSS (MB) | output (MB) |"
    print "|---|---:|---:|---:|---:|---:|"
    cp = failed[1] ? 0 : t[1]     # the first two rows: cp, cp + fsync
    cps = failed[2] ? 0 : t[2]
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | |\n", name[i]; continue }
        xcp = (cp > 0) ? sprintf("%.2f", t[i] / cp) : "-"
        xcps = (cps > 0) ? sprintf("%.2f", t[i] / cps) : "-"
        printf "| %s | %.2f | %s | %s | %.0f | %.1f |\n", name[i], t[i], xcp, xcps, m[i] / 1024, sz[i] / 1e6
    }
}' "$results"
