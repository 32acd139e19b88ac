# Sourced by the benchmark scripts of bench/: finding the tool, the shared
# environment (BENCH_N, BENCH_DIR, BENCH_PYTHON, BENCH_GEN_ARGS,
# BENCH_DROP_CACHES), timed runs and the header of every report.
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
    n=${BENCH_N:-5}
    py=${BENCH_PYTHON:-/usr/bin/python3}
    gen_args=${BENCH_GEN_ARGS:-}
    if [ ! -x /usr/bin/time ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "bench: installing the 'time' package for /usr/bin/time" >&2
            apt-get install -y time >/dev/null 2>&1 ||
                { apt-get update >/dev/null 2>&1 && apt-get install -y time >/dev/null 2>&1; } || true
        fi
        [ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
    fi
    "$py" -c 'import torch' 2>/dev/null || { echo "bench: $py cannot import torch" >&2; exit 2; }
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
}

# the files bench_init and bench_run make, and the folder when bench_init made it
bench_rm_dir() {
    rm -f "$dir/time.txt" "$dir/err.txt" "$dir/results.txt"
    [ -n "$made_dir" ] && rm -rf "$dir"
    return 0
}

drop_caches() {
    if [ "${BENCH_DROP_CACHES:-0}" = 1 ]; then
        sync
        if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
    fi
}

# bench_run NAME OUT OKMAX CMD...: one untimed run (it warms the page cache), then $n timed
# runs; an exit status above OKMAX is a failure. OUT is the output file, removed before each
# run and sized after the last ("-": none). Appends to $results the line
# NAME<TAB>seconds...<TAB>peak RSS KB...<TAB>output bytes<TAB>exit status, or NAME<TAB>FAILED.
bench_run() {
    name=$1; out=$2; okmax=$3; shift 3
    times=; rsss=; i=0; st=0
    [ "$out" = - ] || rm -f "$out"
    "$@" >/dev/null 2>&1 || true
    while [ $i -lt "$n" ]; do
        [ "$out" = - ] || rm -f "$out"
        drop_caches
        st=0
        /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt" || st=$?
        if [ "$st" -gt "$okmax" ]; then
            echo "bench: $name failed (exit $st): $(tail -n 3 "$dir/err.txt")" >&2
            printf '%s\tFAILED\n' "$name" >> "$results"
            return 0
        fi
        t=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f1)
        m=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f2)
        times="$times $t"; rsss="$rsss $m"
        i=$((i + 1))
        echo "bench: $name run $i/$n: ${t}s, ${m} KB, exit $st" >&2
    done
    size=0
    [ "$out" = - ] || size=$(stat -c %s "$out" 2>/dev/null || echo 0)
    [ "$out" = - ] || rm -f "$out"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$times" "$rsss" "$size" "$st" >> "$results"
}

# bench_header TITLE INPUT_LINE: the report's heading and the machine it ran on
bench_header() {
    echo "## $1"
    echo
    echo "- $2"
    echo "- $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
    echo "- torch $("$py" -c 'import torch; print(torch.__version__)'), tensorctl: $tool"
    echo "- $n runs each after one untimed run, median reported; page cache $( [ "${BENCH_DROP_CACHES:-0}" = 1 ] && [ -w /proc/sys/vm/drop_caches ] && echo dropped before each run || echo warm)"
    echo
}

# An awk program's first part for $results: median(list), and per line i: name[i], failed[i],
# t[i] (median seconds), m[i] (median peak RSS, KB), sz[i] (output bytes), st[i] (exit
# status), idx[name]. Use: awk -F'\t' "$BENCH_AWK"' END { ... }' "$results"
BENCH_AWK='
function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    if (k == 0) return 0
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{ name[NR] = $1; failed[NR] = ($2 == "FAILED"); if (!failed[NR]) { t[NR] = median($2); m[NR] = median($3); sz[NR] = $4; st[NR] = $5 }; idx[$1] = NR }
'
