#!/bin/sh
# loaded_when_needed.sh TENSORCTL SAMPLE: the libraries tensorctl loads when first needed (dl.h)
# stay unloaded until then. The binary links neither OpenSSL's libcrypto nor libarchive; inspect of
# SAMPLE (a torch zip) maps neither; inspect --hash loads libcrypto and prints every hash; scan of
# a folder holding a gzip file loads libarchive. The dynamic loader says what it loads (LD_DEBUG).
set -u
tool=$1
sample=$2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# what the dynamic loader loaded, one soname a line, for the command
loaded() { LD_DEBUG=files "$@" 2>&1 >/dev/null | sed -n 's/.*file=\(lib[^ ]*\) .*/\1/p' | sort -u; }

if command -v readelf >/dev/null 2>&1; then
    needed=$(readelf -d "$tool" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    echo "$needed" | grep -q '^libcrypto\.' && fail "the binary links libcrypto: $needed"
    echo "$needed" | grep -q '^libarchive\.' && fail "the binary links libarchive: $needed"
fi

libs=$(loaded "$tool" inspect "$sample")
echo "$libs" | grep -q '^libcrypto\.' && fail "inspect loaded libcrypto: $(echo $libs)"
echo "$libs" | grep -q '^libarchive\.' && fail "inspect loaded libarchive: $(echo $libs)"
echo "$libs" | grep -q '^libz\.' || fail "the loader's list names no libz (LD_DEBUG=files gave: $(echo $libs))"

libs=$(loaded "$tool" inspect --hash "$sample")
echo "$libs" | grep -q '^libcrypto\.' || fail "inspect --hash did not load libcrypto: $(echo $libs)"
"$tool" inspect --hash "$sample" >"$tmp/hash.txt" 2>&1 || fail "inspect --hash failed: $(cat "$tmp/hash.txt")"
grep -qE '[0-9a-f]{64}' "$tmp/hash.txt" || fail "inspect --hash printed no SHA-256: $(cat "$tmp/hash.txt")"

mkdir "$tmp/tree"
echo hello | gzip >"$tmp/tree/notes.gz"
libs=$(loaded "$tool" scan "$tmp/tree")
echo "$libs" | grep -q '^libarchive\.' || fail "scan of a gzip file did not load libarchive: $(echo $libs)"
echo "$libs" | grep -q '^libcrypto\.' && fail "scan loaded libcrypto: $(echo $libs)"

[ $fails -eq 0 ] && echo "ok: libcrypto and libarchive are loaded when needed, and only then"
[ $fails -eq 0 ]
