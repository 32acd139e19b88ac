#!/bin/sh
# Every rewriting command timed in both states of its output, beside cp in the same state:
#   new       the output does not exist (removed before each run), beside cp to a new file
#   replaced  the output exists, the previous run's (to-cpu, the cast and convert with --force),
#             beside cp over an existing copy (which truncates it, then writes)
# and --in-place, which always replaces (its input, a fresh copy of the checkpoint made before
# each run), beside cp over an existing copy. Whatever is removed or re-created for a run is done
# before it, untimed, followed by a sync and a pause.
#
# usage: bench/bench_replace.sh [TENSORCTL]   (default: tensorctl from PATH, else build/tensorctl)
#
# Environment: as bench/bench.sh (BENCH_N, BENCH_DIR, BENCH_CKPT, BENCH_PYTHON, BENCH_GEN_ARGS,
# BENCH_DROP_CACHES), and BENCH_PAUSE=SECONDS (default 1), the pause before each run.
#
# Prints a markdown table on stdout: per job, the median wall time in each state, its ratio to cp
# in the same state, the goal, and the peak RSS (/usr/bin/time -f %M); the machine's load average
# and free memory before and after. The goals (to-cpu 0.8x cp, a bfloat16 cast 0.6x, convert to
# safetensors 1.0x, --in-place 1.0x cp over a copy, 64 MiB peak RSS) hold on a quiet machine; on a
# loaded one (load average above the number of CPUs) the figures are indicative only.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_init tensorctl-bench-replace "${1:-}"
cleanup() {
    rm -f "$dir/out.pt" "$dir/out.safetensors" "$dir/work.pt"
    [ -n "$gen_ckpt" ] && rm -f "$gen_ckpt"
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_gpt2_ckpt
before=$(bench_machine_state)

out=$dir/out.pt
# both states of one job: JOB OUT CMD...
both() {
    job=$1; o=$2; shift 2
    bench_state=new bench_run "$job | new" "$o" 0 "$@"
    bench_state=replace bench_run "$job | replaced" "$o" 0 "$@"
}
both "cp" "$out" cp "$ckpt" "$out"
both "to-cpu --no-sync" "$out" "$tool" to-cpu -q --no-sync -f "$ckpt" -o "$out"
both "to-cpu --no-sync --dtype bfloat16" "$out" "$tool" to-cpu -q --no-sync -f --dtype bfloat16 "$ckpt" -o "$out"
both "convert --no-sync to safetensors" "$dir/out.safetensors" \
    "$tool" convert -q --no-sync -f "$ckpt" "$dir/out.safetensors"
both "to-cpu (fsync)" "$out" "$tool" to-cpu -q -f "$ckpt" -o "$out"
# --in-place rewrites its input, which must be the cuda-tagged checkpoint each time: a fresh copy
# before each run (untimed); it always makes the file durable (the input is at stake)
bench_prep="cp '$ckpt' '$dir/work.pt'" bench_state=replace \
    bench_run "to-cpu --in-place | replaced" "$dir/work.pt" 0 "$tool" to-cpu -q --in-place "$dir/work.pt"

ckpt_size=$(stat -c %s "$ckpt")
bench_header "tensorctl: writing a new output and replacing an existing one" \
    "checkpoint: $(basename "$ckpt"), $(awk -v b="$ckpt_size" 'BEGIN{printf "%.2f GB", b/1e9}'), storages tagged cuda:0" \
    "before: $before" "pause of ${BENCH_PAUSE:-1} s after the sync before each run"
awk -F'\t' "$BENCH_AWK"'
function cell(k) { return (k in idx) ? (failed[idx[k]] ? "failed" : sprintf("%.2f", t[idx[k]])) : "-" }
function ratio(k, c) { return ((k in idx) && (c in idx) && !failed[idx[k]] && !failed[idx[c]] && t[idx[c]] > 0) ? sprintf("%.2f", t[idx[k]] / t[idx[c]]) : "-" }
function rss(k) { return ((k in idx) && !failed[idx[k]]) ? m[idx[k]] / 1024 : 0 }
END {
    goal["to-cpu --no-sync"] = "0.8"; goal["to-cpu --no-sync --dtype bfloat16"] = "0.6"
    goal["convert --no-sync to safetensors"] = "1.0"; goal["to-cpu --in-place"] = "1.0 (x cp over)"
    print "| job | new output (s) | x cp to a new file | replacing an output (s) | x cp over a copy | goal (x cp) | peak RSS (MB) |"
    print "|---|---:|---:|---:|---:|---:|---:|"
    njobs = 0
    for (i = 1; i <= NR; i++) {
        j = name[i]; sub(/ \| (new|replaced)$/, "", j)
        if (!(j in seen)) { seen[j] = 1; order[++njobs] = j }
    }
    for (k = 1; k <= njobs; k++) {
        j = order[k]; a = rss(j " | new"); b = rss(j " | replaced")
        printf "| %s | %s | %s | %s | %s | %s | %.0f |\n", j, cell(j " | new"), ratio(j " | new", "cp | new"),
            cell(j " | replaced"), ratio(j " | replaced", "cp | replaced"), (j in goal) ? goal[j] : "-", (a > b ? a : b)
    }
}' "$results"
echo
if awk -v c="$(nproc)" '{ exit !($1 > c) }' /proc/loadavg; then
    echo "- the load average is above the number of CPUs (other work shares them): these figures are indicative only"
fi
