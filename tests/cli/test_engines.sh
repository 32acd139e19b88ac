#!/bin/sh
# The CPU and CUDA engines give identical files: every input cast to every
# floating-point type with --engine cpu and with --engine cuda, byte for byte
# (outputs carry their file name inside, so both go to same-named files in two
# folders). Exits 77 (meson's skip) with the reason where no GPU is usable.
#
# usage: test_engines.sh TENSORCTL OUTDIR INPUT...
# ENGINES="cpu cpu" runs the same comparison between two CPU runs (a check of
# this script on machines without a GPU).
# A missing INPUT fails (both engines failing alike on it would prove nothing),
# and so does a run in which no file was written and compared.
set -u
tool=$1
out=$2
shift 2
engines=${ENGINES:-cpu cuda}
a=${engines% *}
b=${engines#* }

if [ "$b" = cuda ] && ! "$tool" devices -q; then
    echo "SKIP: no usable GPU here: $("$tool" devices 2>&1 | grep '^cuda' | head -n 1)"
    exit 77
fi

rm -rf "$out"
mkdir -p "$out/1" "$out/2"
fails=0
checks=0
compared=0
for f in "$@"; do
    name=$(basename "$f")
    if [ ! -f "$f" ]; then
        echo "FAIL $name: no such input: $f"
        fails=$((fails + 1))
        continue
    fi
    for t in float64 float32 float16 bfloat16 float8_e4m3fn float8_e5m2; do
        o="$name.$t.pt"
        if ! "$tool" to-cpu "$f" -o "$out/1/$o" -q --force --dtype "$t" --engine "$a" 2>"$out/err_a"; then
            # an input that cannot be cast must fail the same way on both engines
            if "$tool" to-cpu "$f" -o "$out/2/$o" -q --force --dtype "$t" --engine "$b" 2>"$out/err_b"; then
                echo "FAIL $name -> $t: the $a engine failed ($(cat "$out/err_a")) but $b did not"
                fails=$((fails + 1))
            elif ! cmp -s "$out/err_a" "$out/err_b"; then
                echo "FAIL $name -> $t: different errors: $(cat "$out/err_a") / $(cat "$out/err_b")"
                fails=$((fails + 1))
            fi
            checks=$((checks + 1))
            continue
        fi
        if ! "$tool" to-cpu "$f" -o "$out/2/$o" -q --force --dtype "$t" --engine "$b" 2>"$out/err_b"; then
            echo "FAIL $name -> $t: --engine $b failed: $(cat "$out/err_b")"
            fails=$((fails + 1))
        elif ! cmp "$out/1/$o" "$out/2/$o"; then
            echo "FAIL $name -> $t: --engine $a and --engine $b wrote different files"
            fails=$((fails + 1))
        else
            compared=$((compared + 1))
        fi
        checks=$((checks + 1))
    done
done
echo "engines $a/$b: $checks checks ($compared files compared byte for byte), $fails failures"
if [ "$compared" -eq 0 ]; then
    echo "FAIL: no file was written by both engines and compared: this run checked nothing"
    exit 1
fi
[ "$fails" -eq 0 ]
