#!/bin/sh
# GGUF both ways against cp, gguf-py and llama-quantize, on llama-shaped inputs of about 1 GB each
# (bench/make_bench_gguf.py: seeded random values):
#   dequantise a Q8_0 GGUF and a Q4_K GGUF to bfloat16 safetensors;
#   quantise bfloat16 and float32 safetensors to Q8_0 and Q4_0 GGUF.
# Each task beside cp of a file as large as its output (the goal: at least cp's throughput on the
# output, in at most 64 MiB), gguf-py doing the same job (GGUFReader + gguf.quants, or
# gguf.quants + GGUFWriter), and for the quantisations llama-quantize on a GGUF of the same values
# (BF16 or F32) when its tools are here.
#
# usage: bench/bench_gguf.sh [TENSORCTL]     (default: tensorctl from PATH, else build/tensorctl)
#
# Environment: BENCH_N (3 runs, the median reported), BENCH_DIR (where the files go, about 12 GB at
# most; default a new mktemp -d folder, removed at exit), BENCH_PYTHON (a Python with gguf and
# numpy; default /usr/bin/python3), BENCH_SIZE (bytes per input, default 1e9), BENCH_NO_GGUF_PY=1
# (skip the gguf-py rows, whose writer holds the whole output in memory), BENCH_DROP_CACHES=1 (drop
# the page cache before each run; needs root), TENSORCTL_LLAMA_CPP_ROOT (a system root with
# llama.cpp-tools, run with chroot, when llama-quantize is not on PATH; the files then go under
# its /tmp).
#
# Prints markdown tables on stdout: median wall time, ratio to cp of the output's bytes and to
# cp + fsync (tensorctl fsyncs its output unless given --no-sync), peak RSS and output size.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_n=3
bench_clock=precise  # the quantisations write 0.15-0.6 GB in about 0.1 s: /usr/bin/time counts 10 ms steps
bench_py_needs='import gguf, numpy'
root=${TENSORCTL_LLAMA_CPP_ROOT:-}
quantize=
if command -v llama-quantize >/dev/null 2>&1; then
    quantize=llama-quantize
    root=
elif [ -n "$root" ] && [ -x "$root/usr/bin/llama-quantize" ]; then
    quantize="chroot $root llama-quantize"
    [ -n "${BENCH_DIR:-}" ] || BENCH_DIR=$(mktemp -d "$root/tmp/tensorctl-bench-gguf.XXXXXX")
    made_root_dir=$BENCH_DIR
fi
bench_init tensorctl-bench-gguf "${1:-}"
[ -n "${made_root_dir:-}" ] && made_dir=1
size=${BENCH_SIZE:-1e9}
cleanup() {
    rm -f "$dir"/*.gguf "$dir"/*.safetensors "$dir"/*.bin "$dir"/results-*.txt
    bench_rm_dir
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the path llama-quantize sees
inside() { if [ -n "$root" ]; then echo "/${1#"$root"/}"; else echo "$1"; fi; }

for k in q8_0 q4_k bf16 f32; do
    case $k in bf16|f32) f="$dir/$k.safetensors" ;; *) f="$dir/$k.gguf" ;; esac
    echo "bench: generating $f" >&2
    "$py" "$here/make_bench_gguf.py" "$k" "$f" --size "$size" >&2
done
if [ -n "$quantize" ]; then
    for k in bf16 f32; do
        echo "bench: generating $dir/$k-in.gguf (the same values, for llama-quantize)" >&2
        "$py" "$here/make_bench_gguf.py" "$k-gguf" "$dir/$k-in.gguf" --size "$size" >&2
    done
fi

# gguf-py doing the same jobs
pydeq='import json, struct, sys
import numpy as np
from gguf import GGUFReader, dequantize
r = GGUFReader(sys.argv[1])
head, off = {}, 0
for t in r.tensors:
    shape = [int(x) for x in reversed(t.shape.tolist())]
    k = "BF16" if len(shape) > 1 else "F32"
    n = int(np.prod(shape)) * (2 if k == "BF16" else 4)
    head[t.name] = {"dtype": k, "shape": shape, "data_offsets": [off, off + n]}
    off += n
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for t in r.tensors:
        x = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        if len(t.shape) > 1:
            u = x.view(np.uint32)
            x = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)
        f.write(x.tobytes())'
pyq='import json, struct, sys
import numpy as np
from gguf import GGMLQuantizationType as T, GGUFWriter, quants
src, dst, q = sys.argv[1], sys.argv[2], T[sys.argv[3]]
blob = np.memmap(src, mode="r")
n = struct.unpack("<Q", bytes(blob[:8]))[0]
head = json.loads(bytes(blob[8:8 + n]))
w = GGUFWriter(dst, "llama")
for name, e in head.items():
    a, b = e["data_offsets"]
    raw = blob[8 + n + a:8 + n + b]
    x = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32) if e["dtype"] == "BF16" else raw.view(np.float32)
    x = x.reshape(e["shape"])
    if x.ndim > 1:
        w.add_tensor(name, quants.quantize(x, q), raw_dtype=q)
    else:
        w.add_tensor(name, np.array(x))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()'

# section NAME: rows go to their own results file (one table per task)
section() { results="$dir/results-$1.txt"; : > "$results"; }

task_dequant() { # KIND
    in="$dir/$1.gguf" out="$dir/out.safetensors" ref="$dir/ref-out.safetensors"
    section "deq-$1"
    "$tool" convert -q --force --no-sync --dtype bfloat16 "$in" "$dir/ref-out.safetensors" # its size, for cp
    bench_run "cp (the output's bytes)" "$out" 0 cp "$ref" "$out"
    bench_run "cp + fsync" "$out" 0 sh -c 'cp "$1" "$2" && sync "$2"' sh "$ref" "$out"
    bench_run "tensorctl convert --dtype bfloat16" "$out" 0 "$tool" convert -q --dtype bfloat16 "$in" "$out"
    bench_run "tensorctl convert --dtype bfloat16 --no-sync" "$out" 0 "$tool" convert -q --no-sync --dtype bfloat16 "$in" "$out"
    [ "${BENCH_NO_GGUF_PY:-0}" = 1 ] || bench_run "gguf-py: GGUFReader + dequantize" "$out" 0 "$py" -c "$pydeq" "$in" "$out"
    rm -f "$ref"
}

task_quant() { # KIND QTYPE
    in="$dir/$1.safetensors" out="$dir/out.gguf" ref="$dir/ref-out.gguf"
    section "q-$1-$2"
    "$tool" convert -q --force --no-sync --dtype "$2" "$in" "$ref"
    bench_run "cp (the output's bytes)" "$out" 0 cp "$ref" "$out"
    bench_run "cp + fsync" "$out" 0 sh -c 'cp "$1" "$2" && sync "$2"' sh "$ref" "$out"
    bench_run "tensorctl convert --dtype $2" "$out" 0 "$tool" convert -q --dtype "$2" "$in" "$out"
    bench_run "tensorctl convert --dtype $2 --no-sync" "$out" 0 "$tool" convert -q --no-sync --dtype "$2" "$in" "$out"
    [ "${BENCH_NO_GGUF_PY:-0}" = 1 ] || bench_run "gguf-py: quants.quantize + GGUFWriter" "$out" 0 "$py" -c "$pyq" "$in" "$out" "$2"
    # shellcheck disable=SC2086
    [ -z "$quantize" ] || bench_run "llama-quantize (from a GGUF of the same values)" "$out" 0 \
        $quantize "$(inside "$dir/$1-in.gguf")" "$(inside "$out")" "$2"
    rm -f "$ref"
}

task_dequant q8_0
task_dequant q4_k
for k in bf16 f32; do
    for q in Q8_0 Q4_0; do task_quant "$k" "$q"; done
done

mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN{printf "%.2f GB", b/1e9}'; }
bench_header "tensorctl GGUF benchmark" \
    "inputs: llama-shaped (dim 2048, ff 5632, vocab 32000), seeded random values: Q8_0 GGUF $(mb "$dir/q8_0.gguf"), Q4_K GGUF $(mb "$dir/q4_k.gguf"), bfloat16 safetensors $(mb "$dir/bf16.safetensors"), float32 safetensors $(mb "$dir/f32.safetensors")" \
    "gguf-py $("$py" -c 'import importlib.metadata as m; print(m.version("gguf"))' 2>/dev/null), numpy $("$py" -c 'import numpy; print(numpy.__version__)' 2>/dev/null)${quantize:+; llama-quantize: $quantize}"
for s in deq-q8_0 deq-q4_k q-bf16-Q8_0 q-bf16-Q4_0 q-f32-Q8_0 q-f32-Q4_0; do
    case $s in
    deq-q8_0) echo "### Q8_0 GGUF -> bfloat16 safetensors" ;;
    deq-q4_k) echo "### Q4_K GGUF -> bfloat16 safetensors" ;;
    q-bf16-*) echo "### bfloat16 safetensors -> ${s#q-bf16-} GGUF" ;;
    q-f32-*) echo "### float32 safetensors -> ${s#q-f32-} GGUF" ;;
    esac
    echo
    awk -F'\t' "$BENCH_AWK"'
    END {
        print "| task | median wall (s) | x cp | x cp + fsync | output MB/s | peak RSS (MB) | output (MB) |"
        print "|---|---:|---:|---:|---:|---:|---:|"
        cp = failed[1] ? 0 : t[1]
        cps = failed[2] ? 0 : t[2]
        for (i = 1; i <= NR; i++) {
            if (failed[i]) { printf "| %s | failed | | | | | |\n", name[i]; continue }
            xcp = (cp > 0) ? sprintf("%.2f", t[i] / cp) : "-"
            xcps = (cps > 0) ? sprintf("%.2f", t[i] / cps) : "-"
            rate = (t[i] > 0) ? sprintf("%.0f", sz[i] / 1e6 / t[i]) : "-"
            printf "| %s | %.2f | %s | %s | %s | %.0f | %.1f |\n", name[i], t[i], xcp, xcps, rate, m[i] / 1024, sz[i] / 1e6
        }
    }' "$dir/results-$s.txt"
    echo
done
