#!/bin/sh
# Text, lists and maps go through base's containers (src/base/buf.h, vec.h, map.h): this fails
# on the idioms they replaced, wherever they reappear in the C sources (src, formats, kernels,
# fuzz, tests):
#   - arithmetic on snprintf's return value (`k += snprintf(...)`: past the end of the buffer
#     when text is cut, the next size wraps; convert's dropped warning overflowed the stack so),
#   - a realloc outside the containers (a hand-rolled growth: tc_grow or TC_VEC does it once,
#     overflow-checked),
#   - an open-addressing probe outside map.c (a hand-rolled hash table: use tc_map).
# usage: source_idioms.sh SOURCE_ROOT
set -u
root=${1:?usage: source_idioms.sh SOURCE_ROOT}

snprintf_sum='\+=[^;]*\bv?snprintf[[:space:]]*\('
realloc_call='\brealloc[[:space:]]*\('
probe='&[[:space:]]*\([[:space:]]*[A-Za-z_][A-Za-z0-9_>.-]*cap[[:space:]]*-[[:space:]]*1[[:space:]]*\)'

# The patterns must catch what they are for, or this test checks nothing.
selftest() { # PATTERN LINE
    printf '%s\n' "$2" | grep -qE "$1" || { echo "source_idioms: pattern $1 misses: $2" >&2; exit 1; }
}
selftest "$snprintf_sum" '        k += (size_t)snprintf(buf + k, n - k, "%s", s);'
selftest "$snprintf_sum" '    at += vsnprintf(b + at, sizeof b - at, fmt, ap);'
selftest "$realloc_call" '    char **p = realloc(v, cap * sizeof *p);'
selftest "$probe" '    for (size_t i = slot(m, a);; i = (i + 1) & (m->cap - 1)) {'

cd "$root" || exit 1
files=$(find src formats kernels fuzz tests -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
[ -n "$files" ] || { echo "source_idioms: no C sources under $root" >&2; exit 1; }
bad=0
report() { # WHAT HITS
    if [ -n "$2" ]; then
        printf '%s\n' "$2" | sed "s/^/  /"
        echo "$1" >&2
        bad=1
    fi
}
# shellcheck disable=SC2086
report "+= on snprintf's result: build the text in a tc_buf (buf.h)" "$(grep -nE "$snprintf_sum" $files)"
# shellcheck disable=SC2086
report "realloc outside base's containers: grow with tc_grow or TC_VEC (vec.h)" \
    "$(grep -nE "$realloc_call" $files | grep -vE '^src/base/(buf|vec|map)\.c:')"
# shellcheck disable=SC2086
report "an open-addressing probe outside map.c: use tc_map (map.h)" \
    "$(grep -nE "$probe" $files | grep -v '^src/base/map\.c:')"
[ $bad -eq 0 ] && echo "$(printf '%s\n' "$files" | wc -l) C sources: no += snprintf, no hand-rolled growth or hash table"
exit $bad
