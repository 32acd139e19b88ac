# Sourced by the benchmark scripts of bench/: finding the tool, the shared
# environment (BENCH_N, BENCH_DIR, BENCH_PYTHON, BENCH_GEN_ARGS,
# BENCH_DROP_CACHES), timed runs and the header of every report.
#
# A script may set, before bench_init, its own defaults and needs:
#   bench_n=N            the default of BENCH_N (5)
#   bench_py=PY          the default of BENCH_PYTHON (/usr/bin/python3)
#   bench_py_needs=CODE  Python that $py must run, checked by bench_init (default: import torch);
#                        empty: no check there (call bench_check_py where $py is needed)
#   bench_clock=precise  bench_run times each run to the microsecond, with bench/clock.c (built
#                        with cc into $dir; python3 where there is no cc) around the process,
#                        instead of with /usr/bin/time (to 10 ms); see bench_run
#
# After bench_init: $tool, $n, $py, $gen_args, $dir (made here unless BENCH_DIR
# is given; $made_dir says so), $results. Each script sets its own cleanup trap
# and calls bench_rm_dir at its end.

# bench_init DIR_PREFIX [TENSORCTL]
bench_init() {
    prefix=$1
    tool=${2:-}
    if [ -z "$tool" ]; then
        if command -v tensorctl >/dev/null 2>&1; then tool=$(command -v tensorctl)
        elif [ -x "$here/../build/tensorctl" ]; then tool="$here/../build/tensorctl"
        else echo "bench: no tensorctl given and none found (pass its path)" >&2; exit 2
        fi
    fi
    n=${BENCH_N:-${bench_n:-5}}
    py=${BENCH_PYTHON:-${bench_py:-/usr/bin/python3}}
    gen_args=${BENCH_GEN_ARGS:-}
    if [ ! -x /usr/bin/time ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "bench: installing the 'time' package for /usr/bin/time" >&2
            apt-get install -y time >/dev/null 2>&1 ||
                { apt-get update >/dev/null 2>&1 && apt-get install -y time >/dev/null 2>&1; } || true
        fi
        [ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
    fi
    if [ "${bench_clock:-}" = precise ] && ! command -v cc >/dev/null 2>&1 && ! command -v python3 >/dev/null 2>&1; then
        echo "bench: neither cc nor python3 for the precise clock" >&2; exit 2
    fi
    [ -z "${bench_py_needs-import torch}" ] || bench_check_py "${bench_py_needs-import torch}"
    made_dir=
    if [ -n "${BENCH_DIR:-}" ]; then
        dir=$BENCH_DIR
        mkdir -p "$dir"
    else
        dir=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")
        made_dir=1
    fi
    results="$dir/results.txt"
    : > "$results"
    bench_clock_exe=
    if [ "${bench_clock:-}" = precise ] && command -v cc >/dev/null 2>&1 &&
        cc -O2 -o "$dir/clock" "$here/clock.c" 2>/dev/null; then
        bench_clock_exe="$dir/clock"
    elif [ "${bench_clock:-}" = precise ]; then
        echo "bench: bench/clock.c did not build: python3 times the runs (its fork adds milliseconds to each)" >&2
    fi
}

# bench_check_py [CODE]: exit unless $py runs CODE (default: import torch)
bench_check_py() {
    "$py" -c "${1:-import torch}" 2>/dev/null ||
        { echo "bench: $py cannot run '${1:-import torch}' (BENCH_PYTHON names another Python)" >&2; exit 2; }
}

# bench_gpt2_ckpt: $ckpt, BENCH_CKPT or else the GPT-2-medium-shaped checkpoint make_bench_ckpt.py
# generates in $dir (with $gen_args); $gen_ckpt names the generated one (for the cleanup to
# remove), empty when BENCH_CKPT was given. A cleanup trap set before may test $gen_ckpt.
gen_ckpt=
bench_gpt2_ckpt() {
    ckpt=${BENCH_CKPT:-}
    if [ -z "$ckpt" ]; then
        gen_ckpt="$dir/gpt2_medium_cuda0.pt"
        ckpt=$gen_ckpt
        echo "bench: generating $ckpt" >&2
        # shellcheck disable=SC2086
        "$py" "$here/make_bench_ckpt.py" "$ckpt" $gen_args >&2
    fi
}

# the files bench_init and bench_run make, and the folder when bench_init made it
bench_rm_dir() {
    rm -f "$dir/time.txt" "$dir/err.txt" "$dir/results.txt" "$dir/clock"
    [ -n "$made_dir" ] && rm -rf "$dir"
    return 0
}

drop_caches() {
    if [ "${BENCH_DROP_CACHES:-0}" = 1 ]; then
        sync
        if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
    fi
}

# The precise clock where bench/clock.c cannot be built: python3 -c "$BENCH_CLOCK" TIMEFILE CMD...
# runs CMD with wall time taken around the process itself (and the fork of the Python process,
# which costs milliseconds: clock.c's posix_spawn does not copy its parent's page tables), writes "seconds 0 user system" to TIMEFILE (as /usr/bin/time -f "%e %M %U %S"
# would, less the peak RSS: a process forked from Python would count Python's own pages) and exits
# with CMD's status.
BENCH_CLOCK='import os, sys, time
cmd = sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (cmd[0], e))
    os._exit(127)
_, status, ru = os.wait4(pid, 0)
dt = time.perf_counter() - t0
with open(sys.argv[1], "w") as f:
    f.write("%.6f 0 %.6f %.6f\n" % (dt, ru.ru_utime, ru.ru_stime))
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))'

# bench_run NAME OUT OKMAX CMD...: one untimed run (it warms the page cache), then $n timed
# runs, each after a sync (not timed) so that it starts with no dirty data left from an earlier
# run, and a pause of $BENCH_PAUSE seconds (default 1) so that the write-back the sync started
# has settled; an exit status above OKMAX is a failure. OUT is the output file or folder, removed
# before each run and sized after the last ("-": none). Two settings change that, for one call:
#   bench_state=replace  OUT is not removed: each run replaces the one before it (the untimed
#                        run makes the first), and OUT is removed only after the last
#   bench_prep=CMD       CMD (sh -c) runs before each run, the untimed one included, untimed
#                        (e.g. a fresh copy of the input that --in-place rewrites) With bench_clock=precise the wall and CPU times
# come from $BENCH_CLOCK and the peak RSS from the untimed run, under /usr/bin/time. Appends to
# $results the line NAME<TAB>seconds...<TAB>peak RSS KB...<TAB>output bytes<TAB>exit
# status<TAB>CPU seconds (user + system)..., or NAME<TAB>FAILED.
bench_run() {
    name=$1; out=$2; okmax=$3; shift 3
    times=; rsss=; cpus=; i=0; st=0
    [ "$out" = - ] || rm -rf "$out"
    [ -z "${bench_prep:-}" ] || sh -c "$bench_prep"
    /usr/bin/time -f %M -o "$dir/time.txt" "$@" >/dev/null 2>&1 || true
    rss0=$(tail -n 1 "$dir/time.txt" 2>/dev/null) || rss0=0
    while [ $i -lt "$n" ]; do
        [ "$out" = - ] || [ "${bench_state:-new}" = replace ] || rm -rf "$out"
        [ -z "${bench_prep:-}" ] || sh -c "$bench_prep"
        sync
        drop_caches
        sleep "${BENCH_PAUSE:-1}"
        st=0
        if [ -n "${bench_clock_exe:-}" ]; then
            "$bench_clock_exe" "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt" || st=$?
        elif [ "${bench_clock:-}" = precise ]; then
            python3 -c "$BENCH_CLOCK" "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt" || st=$?
        else
            /usr/bin/time -f "%e %M %U %S" -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt" || st=$?
        fi
        if [ "$st" -gt "$okmax" ]; then
            echo "bench: $name failed (exit $st): $(tail -n 3 "$dir/err.txt")" >&2
            printf '%s\tFAILED\n' "$name" >> "$results"
            return 0
        fi
        t=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f1)
        m=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f2)
        c=$(tail -n 1 "$dir/time.txt" | awk '{ printf "%.6f", $3 + $4 }')
        if [ "${bench_clock:-}" = precise ]; then m=$rss0; fi
        times="$times $t"; rsss="$rsss $m"; cpus="$cpus $c"
        i=$((i + 1))
        echo "bench: $name run $i/$n: ${t}s, ${m} KB, exit $st" >&2
    done
    size=0
    [ "$out" = - ] || size=$(du -sb "$out" 2>/dev/null | cut -f1)
    [ "$out" = - ] || rm -rf "$out"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$times" "$rsss" "${size:-0}" "$st" "$cpus" >> "$results"
}

# bench_header TITLE LINE...: the report's heading, each LINE (the input, ...) as an item, and
# the machine it ran on
bench_header() {
    echo "## $1"
    echo
    shift
    for line in "$@"; do echo "- $line"; done
    echo "- $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
    v=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) || v=
    echo "- ${v:+torch $v, }tensorctl: $tool"
    echo "- at the end: $(bench_machine_state)"
    echo "- $n runs each after one untimed run, median reported; page cache $( [ "${BENCH_DROP_CACHES:-0}" = 1 ] && [ -w /proc/sys/vm/drop_caches ] && echo synced and dropped || echo warm, synced) before each run$( [ "${bench_clock:-}" = precise ] && echo "; wall time measured around each process, to the microsecond ($( [ -n "${bench_clock_exe:-}" ] && echo "bench/clock.c: posix_spawn and wait4" || echo "python3: fork, exec and wait4")); peak RSS from the untimed run")"
    echo
}

# The machine's state now: load average and memory free and available (the figures of a loaded
# machine are indicative only)
bench_machine_state() {
    awk '{ printf "load average %s %s %s", $1, $2, $3 }' /proc/loadavg
    awk '/^MemFree:/ { f = $2 } /^MemAvailable:/ { a = $2 } /^Cached:/ { c = $2 }
         END { printf ", memory free %.1f GiB, available %.1f GiB, page cache %.1f GiB\n", f / 1048576, a / 1048576, c / 1048576 }' /proc/meminfo
}

# An awk program's first part for $results: median(list), and per line i: name[i], failed[i],
# t[i] (median seconds), m[i] (median peak RSS, KB), sz[i] (output bytes), st[i] (exit
# status), cpu[i] (median CPU seconds), idx[name]. Use: awk -F'\t' "$BENCH_AWK"' END { ... }' "$results"
BENCH_AWK='
function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    if (k == 0) return 0
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{ name[NR] = $1; failed[NR] = ($2 == "FAILED"); if (!failed[NR]) { t[NR] = median($2); m[NR] = median($3); sz[NR] = $4; st[NR] = $5; cpu[NR] = median($6) }; idx[$1] = NR }
'
