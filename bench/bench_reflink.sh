#!/bin/sh
# tensorctl to-cpu beside cp on a file system that clones blocks (XFS, reflink=1: what coreutils 9's
# cp does there is share the file's blocks, not copy them) and on the normal folder (ext4 here).
#
# usage: bench/bench_reflink.sh [TENSORCTL]     (as root: it makes and loop-mounts an XFS image)
#
# Environment:
#   BENCH_N=5            repetitions of each task (the median is reported)
#   BENCH_DIR=DIR        the normal folder: the checkpoint, the ext4 runs and the XFS image (sparse)
#                        go there (default: a new mktemp -d dir, removed at exit)
#   BENCH_CKPT=FILE      use this checkpoint instead of generating one (it is not deleted)
#   BENCH_PYTHON=PY      Python with torch, to generate the checkpoint (default /usr/bin/python3)
#   BENCH_GEN_ARGS="..." extra args for make_bench_ckpt.py (e.g. "--layers 2" for a smoke run)
#   BENCH_BASELINE=PROG  another tensorctl (e.g. a build from before this feature), timed as well
#   BENCH_DROP_CACHES=1  drop the page cache before each run (skipped where it cannot be written)
#
# Prints a markdown table on stdout: median wall time (measured around the process, to the
# microsecond) and CPU time (user + system: what other load on the machine does not inflate),
# each with its ratio to cp on the same file system, peak RSS (the untimed run, under
# /usr/bin/time); then what `tensorctl to-cpu -v` says it shared, copied and wrote on each.
# Progress goes to stderr.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ "$(id -u)" = 0 ] || { echo "bench_reflink: needs root (to make and mount an XFS image)" >&2; exit 2; }
command -v mkfs.xfs >/dev/null 2>&1 || { echo "bench_reflink: no mkfs.xfs (apt-get install xfsprogs)" >&2; exit 2; }
bench_py_needs=      # torch only to generate the checkpoint: checked there
bench_clock=precise  # cp sharing the blocks takes milliseconds
bench_init tensorctl-bench-reflink "${1:-}"
tool=$(cd "$(dirname "$tool")" && pwd)/$(basename "$tool")
dir=$(cd "$dir" && pwd)
base=${BENCH_BASELINE:-}
img="$dir/xfs.img"
mnt="$dir/xfs"
gen_ckpt=
mounted=
cleanup() {
    if [ -n "$mounted" ]; then umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; fi
    rm -f "$img" "$dir/out.pt" "$dir/sharing.txt"
    rmdir "$mnt" 2>/dev/null || true
    [ -n "$gen_ckpt" ] && rm -f "$gen_ckpt"
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ckpt=${BENCH_CKPT:-}
if [ -z "$ckpt" ]; then
    bench_check_py
    gen_ckpt="$dir/gpt2_medium_cuda0.pt"
    ckpt=$gen_ckpt
    echo "bench_reflink: generating $ckpt" >&2
    # shellcheck disable=SC2086
    "$py" "$here/make_bench_ckpt.py" "$ckpt" $gen_args >&2
fi
size=$(stat -c %s "$ckpt")

# each task's name: the file system, a space, the task
phase() {
    fs=$1
    if [ "$fs" = xfs ]; then in="$mnt/in.pt"; out="$mnt/out.pt"; else in=$ckpt; out="$dir/out.pt"; fi
    bench_run "$fs cp" "$out" 0 cp "$in" "$out"
    # tensorctl fsyncs its output before renaming it into place; this is cp made as durable
    bench_run "$fs cp + fsync" "$out" 0 sh -c 'cp "$1" "$2" && sync "$2"' sh "$in" "$out"
    bench_run "$fs tensorctl to-cpu" "$out" 0 "$tool" to-cpu -q "$in" -o "$out"
    bench_run "$fs tensorctl to-cpu --no-sync" "$out" 0 "$tool" to-cpu -q --no-sync "$in" -o "$out"
    bench_run "$fs tensorctl extract --no-sync" "$out" 0 "$tool" extract -q --no-sync "$in" -o "$out"
    if [ -n "$base" ]; then
        bench_run "$fs baseline to-cpu" "$out" 0 "$base" to-cpu -q "$in" -o "$out"
    fi
    rm -f "$out"
    "$tool" to-cpu -v "$in" -o "$out" 2>&1 | sed -n "s|^tensorctl: $out: |$fs: |p" >> "$dir/sharing.txt"
    rm -f "$out"
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
# ext4 first: the image's page cache, written through the loop device and then freed, leaves the
# machine slow to write new pages for a while where freed memory goes back to a hypervisor
phase ext4

# the image: room for the input and a few whole copies, in case something does not share
truncate -s $((size * 4 + (1 << 30))) "$img"
mkfs.xfs -q -f -m reflink=1 "$img"
mkdir -p "$mnt"
mount -o loop "$img" "$mnt"
mounted=1
echo "bench_reflink: copying the checkpoint into the XFS image" >&2
cp --reflink=never "$ckpt" "$mnt/in.pt"
sync
phase xfs

bench_header "tensorctl to-cpu beside cp, on XFS (blocks cloned) and ext4" \
    "checkpoint: $(basename "$ckpt"), $(awk -v b="$size" 'BEGIN{printf "%.2f GB", b/1e9}'), storages tagged cuda:0" \
    "XFS: a loop-mounted image (mkfs.xfs -m reflink=1) on the ext4 folder; $(cp --version | head -n 1); load average before: $load"
awk -F'\t' "$BENCH_AWK"'
{ f = $1; sub(/ .*/, "", f); fs[NR] = f; task[NR] = substr($1, length(f) + 2)
  if (task[NR] == "cp" && !failed[NR]) { cp[f] = t[NR]; cpc[f] = cpu[NR] } }
END {
    print "| file system | task | median wall (s) | x cp there | median CPU (s) | CPU x cp | peak RSS (MB) |"
    print "|---|---|---:|---:|---:|---:|---:|"
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | %s | failed | | | | |\n", fs[i], task[i]; continue }
        x = (fs[i] in cp && cp[fs[i]] > 0) ? sprintf("%.1f", t[i] / cp[fs[i]]) : "-"
        xc = (fs[i] in cpc && cpc[fs[i]] > 0) ? sprintf("%.1f", cpu[i] / cpc[fs[i]]) : "-"
        printf "| %s | %s | %.4f | %s | %.4f | %s | %.0f |\n", fs[i], task[i], t[i], x, cpu[i], xc, m[i] / 1024
    }
}' "$results"
echo
echo "tensorctl to-cpu -v (bytes of the output):"
echo
sed 's/^/- /' "$dir/sharing.txt"
rm -f "$dir/sharing.txt"
