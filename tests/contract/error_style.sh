#!/bin/sh
# One error style per layer (docs/architecture.md): below the CLI, each step is checked as it is
# taken (`if ((rc = step(...))) return rc;`, then `goto fail` / `goto done`). This fails on the
# older chain, `if (!rc) rc = ...` / `if (!rc && ...)`, in the C sources of base, kernels, codecs,
# model, drivers and operations, except in the files listed below (none now: every file was moved
# file by file). The list only shrinks: a listed file that no longer chains fails too, so that it
# comes off the list and stays converted.
# usage: error_style.sh SOURCE_ROOT
set -u
root=${1:?usage: error_style.sh SOURCE_ROOT}

chain='\bif[[:space:]]*\(!rc([[:space:]]*\)|[[:space:]]*&&)'

not_yet='
'

# The pattern must catch what it is for, and leave the stated style alone, or this checks nothing.
selftest() { # EXPECT(0: match, 1: no match) LINE
    printf '%s\n' "$2" | grep -qE "$chain"
    [ $? -eq "$1" ] || { echo "error_style: pattern $chain is wrong about: $2" >&2; exit 1; }
}
selftest 0 '    if (!rc)'
selftest 0 '    if (!rc) rc = tc_dst_commit(&dst, d);'
selftest 0 '    if (!rc && n)'
selftest 0 '    } else if (!rc) {'
selftest 1 '    if ((rc = tc_dst_commit(&dst, d)))'
selftest 1 '    for (size_t i = 0; i < n && !rc; i++)'
selftest 1 '    if (!rcount)'

cd "$root" || exit 1
files=$(find src/base src/model src/ops kernels formats -type f \( -name '*.c' -o -name '*.cu' \) | sort)
[ -n "$files" ] || { echo "error_style: no C sources under $root" >&2; exit 1; }
bad=0
for f in $not_yet; do
    if [ ! -f "$f" ]; then
        echo "error_style: $f is listed as not yet converted but is not there: take it off the list" >&2
        bad=1
    elif ! grep -qE "$chain" "$f"; then
        echo "error_style: $f no longer chains if (!rc): take it off the list" >&2
        bad=1
    fi
done
n=0
for f in $files; do
    case "
$not_yet" in
    *"
$f
"*) continue ;;
    esac
    n=$((n + 1))
    hits=$(grep -nE "$chain" "$f")
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits" | sed "s|^|  $f:|"
        echo "error_style: $f chains steps with if (!rc): check each as it is taken (docs/architecture.md)" >&2
        bad=1
    fi
done
[ $bad -eq 0 ] && echo "$n C sources check each step as it is taken; $(printf '%s' "$not_yet" | grep -c .) still chain"
exit $bad
