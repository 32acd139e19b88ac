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
#
# Prints a markdown table on stdout: median wall time (measured around the process, to the
# microsecond) and CPU time (user + system: what other load on the machine does not inflate),
# each with its ratio to cp on the same file system, peak RSS (one more run under
# /usr/bin/time); then what `tensorctl to-cpu -v` says it shared, copied and wrote on each.
# Progress goes to stderr.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
tool=${1:-}
if [ -z "$tool" ]; then
    if command -v tensorctl >/dev/null 2>&1; then tool=$(command -v tensorctl)
    elif [ -x "$here/../build/tensorctl" ]; then tool="$here/../build/tensorctl"
    else echo "bench_reflink: no tensorctl given and none found (pass its path)" >&2; exit 2
    fi
fi
tool=$(cd "$(dirname "$tool")" && pwd)/$(basename "$tool")
n=${BENCH_N:-5}
py=${BENCH_PYTHON:-/usr/bin/python3}
[ "$(id -u)" = 0 ] || { echo "bench_reflink: needs root (to make and mount an XFS image)" >&2; exit 2; }
command -v mkfs.xfs >/dev/null 2>&1 || { echo "bench_reflink: no mkfs.xfs (apt-get install xfsprogs)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_reflink: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
base=${BENCH_BASELINE:-}

made_dir=
if [ -n "${BENCH_DIR:-}" ]; then
    dir=$BENCH_DIR
    mkdir -p "$dir"
else
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tensorctl-bench.XXXXXX")
    made_dir=1
fi
dir=$(cd "$dir" && pwd)
img="$dir/xfs.img"
mnt="$dir/xfs"
gen_ckpt=
mounted=
cleanup() {
    if [ -n "$mounted" ]; then umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; fi
    rm -f "$img" "$dir/out.pt" "$dir/results.txt" "$dir/rss.txt" "$dir/sharing.txt"
    rmdir "$mnt" 2>/dev/null || true
    [ -n "$gen_ckpt" ] && rm -f "$gen_ckpt"
    [ -n "$made_dir" ] && rm -rf "$dir"
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ckpt=${BENCH_CKPT:-}
if [ -z "$ckpt" ]; then
    "$py" -c 'import torch' 2>/dev/null || { echo "bench_reflink: $py cannot import torch" >&2; exit 2; }
    gen_ckpt="$dir/gpt2_medium_cuda0.pt"
    ckpt=$gen_ckpt
    echo "bench_reflink: generating $ckpt" >&2
    # shellcheck disable=SC2086
    "$py" "$here/make_bench_ckpt.py" "$ckpt" ${BENCH_GEN_ARGS:-} >&2
fi
size=$(stat -c %s "$ckpt")

# the image: room for the input and a few whole copies, in case something does not share
truncate -s $((size * 4 + (1 << 30))) "$img"
mkfs.xfs -q -f -m reflink=1 "$img"
mkdir -p "$mnt"
mount -o loop "$img" "$mnt"
mounted=1
echo "bench_reflink: copying the checkpoint into the XFS image" >&2
cp --reflink=never "$ckpt" "$mnt/in.pt"
sync

results="$dir/results.txt"
: > "$results"
load=$(cut -d' ' -f1-3 /proc/loadavg)

# time FS NAME OUT CMD...: BENCH_N runs, OUT removed and everything synced before each (wall time
# taken around the process itself), then one under /usr/bin/time for the peak RSS (a process
# forked from Python would count Python's own pages); appends "FS<tab>NAME<tab>secs...<tab>kb"
timeit() {
    fs=$1; name=$2; out=$3; shift 3
    FS=$fs NAME=$name
    export FS NAME
    rm -f "$out"
    if ! /usr/bin/time -f %M -o "$dir/rss.txt" "$@" >/dev/null 2>&1; then
        printf '%s\t%s\tFAILED\n' "$fs" "$name" >> "$results"
        return 0
    fi
    RSS=$(tail -n 1 "$dir/rss.txt") python3 - "$n" "$out" "$@" <<'PY' >> "$results" || { printf '%s\t%s\tFAILED\n' "$fs" "$name" >> "$results"; }
import os, sys, time
n, out, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
secs, cpus = [], []
for i in range(n):
    if os.path.exists(out):
        os.remove(out)
    os.sync()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    dt = time.perf_counter() - t0
    if status != 0:
        sys.exit("%s: exit status %d" % (" ".join(cmd), status))
    secs.append(dt)
    cpus.append(ru.ru_utime + ru.ru_stime)
    print("bench_reflink: %s %s run %d/%d: %.4fs" % (os.environ["FS"], os.environ["NAME"], i + 1, n, dt),
          file=sys.stderr)
print("%s\t%s\t%s\t%s\t%s" % (os.environ["FS"], os.environ["NAME"], " ".join("%.6f" % s for s in secs), os.environ["RSS"],
                              " ".join("%.6f" % c for c in cpus)))
PY
    rm -f "$out" "$dir/rss.txt"
}

for fs in xfs ext4; do
    if [ "$fs" = xfs ]; then in="$mnt/in.pt"; out="$mnt/out.pt"; else in=$ckpt; out="$dir/out.pt"; fi
    timeit "$fs" cp "$out" cp "$in" "$out"
    # tensorctl fsyncs its output before renaming it into place; this is cp made as durable
    timeit "$fs" "cp + fsync" "$out" sh -c 'cp "$1" "$2" && sync "$2"' sh "$in" "$out"
    timeit "$fs" "tensorctl to-cpu" "$out" "$tool" to-cpu -q "$in" -o "$out"
    if [ -n "$base" ]; then
        timeit "$fs" "baseline to-cpu" "$out" "$base" to-cpu -q "$in" -o "$out"
    fi
    rm -f "$out"
    "$tool" to-cpu -v "$in" -o "$out" 2>&1 | sed -n "s|^tensorctl: $out: |$fs: |p" >> "$dir/sharing.txt"
    rm -f "$out"
done

echo "## tensorctl to-cpu beside cp, on XFS (blocks cloned) and ext4"
echo
echo "- checkpoint: $(basename "$ckpt"), $(awk -v b="$size" 'BEGIN{printf "%.2f GB", b/1e9}'), storages tagged cuda:0"
echo "- $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo), $(cp --version | head -n 1)"
echo "- XFS: a loop-mounted image (mkfs.xfs -m reflink=1) on the ext4 folder; $n runs each, median;"
echo "  page cache warm; wall time measured around each process; load average before: $load"
echo
awk -F'\t' '
function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{ fs[NR] = $1; name[NR] = $2; failed[NR] = ($3 == "FAILED")
  if (!failed[NR]) { t[NR] = median($3); m[NR] = $4; c[NR] = median($5) }
  if ($2 == "cp" && !failed[NR]) { cp[$1] = t[NR]; cpc[$1] = c[NR] } }
END {
    print "| file system | task | median wall (s) | x cp there | median CPU (s) | CPU x cp | peak RSS (MB) |"
    print "|---|---|---:|---:|---:|---:|---:|"
    for (i = 1; i <= NR; i++) {
        if (failed[i]) { printf "| %s | %s | failed | | | | |\n", fs[i], name[i]; continue }
        x = (fs[i] in cp && cp[fs[i]] > 0) ? sprintf("%.1f", t[i] / cp[fs[i]]) : "-"
        xc = (fs[i] in cpc && cpc[fs[i]] > 0) ? sprintf("%.1f", c[i] / cpc[fs[i]]) : "-"
        printf "| %s | %s | %.4f | %s | %.4f | %s | %.0f |\n", fs[i], name[i], t[i], x, c[i], xc, m[i] / 1024
    }
}' "$results"
echo
echo "tensorctl to-cpu -v (bytes of the output):"
echo
sed 's/^/- /' "$dir/sharing.txt"
rm -f "$dir/sharing.txt"
