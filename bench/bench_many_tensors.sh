#!/bin/sh
# Benchmark the cost per tensor: a safetensors file of many small tensors (400,000 of 2 float32
# elements: about 36 MB, nearly all header) and the .pt tensorctl converts it to, through inspect,
# convert (to .pt and to .safetensors), to-cpu of the .pt (a safetensors file saves no device) and
# diff, beside the safetensors library's safe_open + keys() and torch (load_file, torch.load) on the
# same files.
#
# usage: bench/bench_many_tensors.sh [TENSORCTL]   (default: tensorctl from PATH, else build/tensorctl)
#
# Environment:
#   BENCH_N=5              repetitions of each task (the median is reported)
#   BENCH_TENSORS=400000   tensors in the file
#   BENCH_DIR=DIR          where the files go (default: a new mktemp -d dir, removed at exit)
#   BENCH_PYTHON=PY        Python with torch and safetensors (default /usr/bin/python3)
#   BENCH_DROP_CACHES=1    drop the page cache before each run (needs root; skipped otherwise)
#
# The goals (issue 21): inspect within 1 s and 128 MiB; convert, to-cpu and diff within 3 s and
# 256 MiB. Prints a markdown table on stdout: median wall time, CPU time, peak RSS
# (/usr/bin/time -f %M), bytes per tensor of that peak, the goal, and the exit status of each task.
# Progress goes to stderr.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bench_py_needs='import torch, safetensors'
. "$here/lib.sh"
bench_init tensorctl-bench-many "${1:-}"
count=${BENCH_TENSORS:-400000}
f_st="$dir/many.safetensors"
f_st2="$dir/many_copy.safetensors"
f_pt="$dir/many.pt"
cleanup() {
    rm -f "$f_st" "$f_st2" "$f_pt" "$dir/out.pt" "$dir/out.safetensors" "$dir/out.cpu.pt"
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench: generating $f_st ($count tensors)" >&2
"$py" - "$f_st" "$count" <<'EOF' >&2
import sys, numpy as np
from safetensors.numpy import save_file
n = int(sys.argv[2])
save_file({"layers.%d.weight" % i: np.full((2,), i, dtype=np.float32) for i in range(n)}, sys.argv[1])
EOF
cp "$f_st" "$f_st2"
"$tool" convert -q "$f_st" "$f_pt"

keys='import sys
from safetensors import safe_open
with safe_open(sys.argv[1], framework="pt") as f:
    print(len(list(f.keys())))'
st_load='import sys
from safetensors.torch import load_file
print(len(load_file(sys.argv[1])))'
pt_load='import sys, torch
print(len(torch.load(sys.argv[1], map_location="cpu")))'

bench_run "tensorctl inspect" - 0 "$tool" inspect "$f_st"
bench_run "tensorctl inspect --json" - 0 "$tool" inspect --json "$f_st"
bench_run "safetensors safe_open + keys()" - 0 "$py" -c "$keys" "$f_st"
bench_run "safetensors load_file" - 0 "$py" -c "$st_load" "$f_st"
bench_run "tensorctl convert to .pt" "$dir/out.pt" 0 "$tool" convert -q "$f_st" "$dir/out.pt"
bench_run "tensorctl convert to .safetensors" "$dir/out.safetensors" 0 "$tool" convert -q "$f_st" "$dir/out.safetensors"
bench_run "tensorctl to-cpu of the .pt" "$dir/out.cpu.pt" 0 "$tool" to-cpu -q "$f_pt" -o "$dir/out.cpu.pt"
bench_run "tensorctl diff (two .safetensors)" - 0 "$tool" diff "$f_st" "$f_st2"
bench_run "tensorctl diff (.safetensors, .pt)" - 0 "$tool" diff "$f_st" "$f_pt"
bench_run "torch.load of the .pt" - 0 "$py" -c "$pt_load" "$f_pt"

stsize=$(stat -c %s "$f_st")
psize=$(stat -c %s "$f_pt")
bench_header "tensorctl cost per tensor" \
    "$count tensors of 2 float32 elements: $(basename "$f_st") $(awk -v b="$stsize" 'BEGIN{printf "%.1f MB", b/1e6}'), and the .pt tensorctl converts it to, $(awk -v b="$psize" 'BEGIN{printf "%.1f MB", b/1e6}')"
awk -F'\t' -v count="$count" "$BENCH_AWK"'
END {
    print "| task | median wall (s) | CPU (s) | peak RSS (MiB) | bytes/tensor | goal | exit |"
    print "|---|---:|---:|---:|---:|---|---:|"
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | failed | | | | | |\n", name[i]; continue }
        g = name[i] ~ /^tensorctl inspect/ ? "1 s, 128 MiB" : name[i] ~ /^tensorctl/ ? "3 s, 256 MiB" : ""
        printf "| %s | %.2f | %.2f | %.1f | %.0f | %s | %d |\n", name[i], t[i], cpu[i], m[i] / 1024, m[i] * 1024 / count,
               g, st[i]
    }
}' "$results"
