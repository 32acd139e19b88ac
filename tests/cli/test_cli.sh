#!/bin/sh
# Command-line contract: exit statuses, messages, output naming, safe writing,
# and --help agreeing with the man page.
# usage: test_cli.sh TENSORCTL SAMPLES_DIR CORPUS_DIR MANPAGE
T=$1 S=$2 C=$3 MAN=$4
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
# expect STATUS NAME CMD...: run CMD, compare the exit status
expect() {
    want=$1 name=$2; shift 2
    "$@" >"$W/out" 2>"$W/err"
    got=$?
    if [ "$got" -eq "$want" ]; then ok "$name"; else bad "$name (exit $got, wanted $want: $(head -c 300 "$W/err"))"; fi
}
one_line() { # the last command printed exactly one stderr line starting "tensorctl: "
    if [ "$(wc -l <"$W/err")" -eq 1 ] && grep -q '^tensorctl: ' "$W/err"; then ok "$1"; else bad "$1: $(cat "$W/err")"; fi
}
has() { if grep -q -- "$2" "$W/$3"; then ok "$1"; else bad "$1 (no '$2' in $3: $(head -c 300 "$W/$3"))"; fi; }

cp "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
sum_before=$(cksum <"$W/m.pt")

expect 0 "inspect a sample" "$T" inspect "$W/m.pt"
has "inspect shows the saved device" "cuda:0" out
expect 0 "inspect a training checkpoint" "$T" inspect "$C/torch-2.14/train_ckpt_cuda.pt"
has "contents show the epoch" "epoch  *3" out
has "contents show the optimizer's hyper-parameters" "optimizer.param_groups.*'lr': 0.0003" out
has "mixed or cuda devices get the map_location note" "map_location" out
expect 0 "inspect mixed devices" "$T" inspect "$C/torch-2.14/mixed_devices.pt"
has "mixed devices are warned about" "different devices" out
expect 2 "no command" "$T"
expect 2 "unknown command" "$T" frobnicate
expect 2 "unknown option" "$T" inspect --frob "$W/m.pt"
one_line "unknown option: one line"
expect 2 "inspect without a file" "$T" inspect
expect 1 "missing file" "$T" inspect "$W/nope.pt"
one_line "missing file: one line"
has "missing file names the file" "nope.pt" err
printf 'hello world, not a model' >"$W/text.pt"
expect 3 "not a checkpoint" "$T" inspect "$W/text.pt"
one_line "not a checkpoint: one line"
: >"$W/empty.pt"
expect 3 "empty file" "$T" inspect "$W/empty.pt"
head -c 3000 "$W/m.pt" >"$W/trunc.pt"
expect 3 "truncated download" "$T" inspect "$W/trunc.pt"
has "truncation is named" "truncated" err
expect 3 "zip entry cap" "$T" inspect --max-entries 3 "$W/m.pt"
has "entry cap names its option" "--max-entries" err
expect 0 "zip entry cap raised" "$T" inspect --max-entries 100 "$W/m.pt"
expect 3 "safetensors header cap" "$T" inspect --max-header-size 64 "$C/torch-2.14/lm.safetensors"
has "header cap names its option" "--max-header-size" err
expect 4 "dangerous file" "$T" inspect "$C/torch-2.14/malicious.pt"
has "dangerous global named" "posix.system" err

# to-cpu: default name, refuse to clobber, --force, same file, --in-place
expect 0 "to-cpu default output" "$T" to-cpu -q "$W/m.pt"
[ -f "$W/m.cpu.pt" ] && ok "default name m.cpu.pt" || bad "default name m.cpu.pt"
expect 0 "inspect output" "$T" inspect --json "$W/m.cpu.pt"
has "output tagged cpu" '"device":	"cpu"' out
expect 2 "existing output refused" "$T" to-cpu "$W/m.pt" -o "$W/m.cpu.pt"
has "refusal mentions --force" "--force" err
expect 0 "--force replaces" "$T" to-cpu -q "$W/m.pt" -o "$W/m.cpu.pt" --force
expect 2 "output equal to input refused" "$T" to-cpu "$W/m.pt" -o "$W/m.pt"
has "refusal mentions --in-place" "--in-place" err
[ "$(cksum <"$W/m.pt")" = "$sum_before" ] && ok "input untouched" || bad "input untouched"
expect 0 "to-cuda default output" "$T" to-cuda -q "$W/m.cpu.pt" --device cuda:1
[ -f "$W/m.cpu.cuda1.pt" ] && ok "default name m.cpu.cuda1.pt" || bad "default name m.cpu.cuda1.pt"
expect 0 "inspect to-cuda output" "$T" inspect --json "$W/m.cpu.cuda1.pt"
has "output tagged cuda:1" '"device":	"cuda:1"' out
cp "$W/m.pt" "$W/inplace.pt"
expect 0 "--in-place" "$T" to-cpu -q --in-place "$W/inplace.pt"
expect 0 "inspect in-place result" "$T" inspect --json "$W/inplace.pt"
has "in-place result tagged cpu" '"device":	"cpu"' out
expect 2 "bad --device" "$T" to-cuda "$W/m.pt" -o "$W/x.pt" --device gpu7
expect 2 "bad --map" "$T" to-cpu "$W/m.pt" -o "$W/x.pt" --map cuda:0
expect 2 "bad --dtype" "$T" to-cpu "$W/m.pt" -o "$W/x.pt" --dtype int8
expect 2 "--keep without --dtype" "$T" to-cpu "$W/m.pt" -o "$W/x.pt" --keep '*'
[ ! -e "$W/x.pt" ] && ok "no output after usage errors" || bad "no output after usage errors"
expect 4 "dangerous file refused" "$T" to-cpu "$C/torch-2.14/malicious.pt" -o "$W/mal.pt"
[ ! -e "$W/mal.pt" ] && ok "no output for a refused file" || bad "no output for a refused file"
expect 3 "truncated input refused" "$T" to-cpu "$W/trunc.pt" -o "$W/t.pt"
[ ! -e "$W/t.pt" ] && ok "no output for a bad input" || bad "no output for a bad input"
ls -a "$W" | grep -q 'tensorctl-' && bad "temporary files left behind" || ok "no temporary files left behind"
expect 1 "unwritable folder" "$T" to-cpu "$W/m.pt" -o "$W/no/such/dir/x.pt"
one_line "unwritable folder: one line"

# a sharded set: two .bin shards tagged cuda:0 and their index, moved to the cpu shard by shard
mkdir -p "$W/st" "$W/bin"
python3 - "$W/st" <<'PY'
import json, struct, sys
d = sys.argv[1]
def shard(fn, tensors):
    hdr, data = {}, b""
    for name, vals in tensors:
        raw = struct.pack("<%df" % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": [len(vals)], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open("%s/%s" % (d, fn), "wb").write(struct.pack("<Q", len(h)) + h + data)
shard("model-00001-of-00002.safetensors", [("a.weight", [1.0, 2.0, 3.0]), ("a.bias", [0.5])])
shard("model-00002-of-00002.safetensors", [("b.weight", [4.0, -5.0])])
wm = {"a.weight": "model-00001-of-00002.safetensors", "a.bias": "model-00001-of-00002.safetensors",
      "b.weight": "model-00002-of-00002.safetensors"}
json.dump({"metadata": {"total_size": 24}, "weight_map": wm}, open(d + "/model.safetensors.index.json", "w"))
PY
expect 0 "inspect a safetensors index" "$T" inspect "$W/st/model.safetensors.index.json"
expect 0 "convert an index to .bin shards on cuda:0" "$T" convert -q "$W/st/model.safetensors.index.json" \
    "$W/bin/pytorch_model.bin.index.json" --device cuda:0 --max-shard-size 16
expect 0 "to-cpu of a sharded set" "$T" to-cpu -q "$W/bin/pytorch_model.bin.index.json" -o "$W/cpu"
expect 0 "inspect the moved set" "$T" inspect --json "$W/cpu/pytorch_model.bin.index.json"
if grep -q '"device":	"cuda' "$W/out"; then bad "moved set still has cuda storages"; else ok "moved set is all cpu"; fi
has "moved set names its shards" '"shard":	"pytorch_model-00002-of-00002.bin"' out
expect 2 "to-cpu of a set without -o" "$T" to-cpu "$W/bin/pytorch_model.bin.index.json"
expect 2 "to-cpu of a set over existing shards" "$T" to-cpu "$W/bin/pytorch_model.bin.index.json" -o "$W/cpu"
expect 0 "to-cuda --dtype of a set" "$T" to-cuda -q "$W/cpu/pytorch_model.bin.index.json" -o "$W/half" \
    --dtype float16 --device cuda:1
expect 0 "inspect the cast set" "$T" inspect --json "$W/half/pytorch_model.bin.index.json"
has "cast set is float16" '"dtype":	"float16"' out
has "cast set is on cuda:1" '"device":	"cuda:1"' out
rm "$W/bin/pytorch_model-00002-of-00002.bin"
expect 3 "a set with a missing shard" "$T" to-cpu "$W/bin/pytorch_model.bin.index.json" -o "$W/cpu2"
[ ! -e "$W/cpu2/pytorch_model-00001-of-00002.bin" ] && ok "no shard left after a failed set" || bad "no shard left after a failed set"

# diff: 0 equal, 1 different, errors 2/3/5 (its 1 is taken)
expect 0 "diff of a file with its copy" "$T" diff "$S/tiny_mlp_cuda0.pt" "$W/m.pt"
has "diff says equal" "^equal: 4 tensors, 4 bit for bit" out
expect 1 "diff of two different files" "$T" diff "$S/tiny_mlp_cuda0.pt" "$S/tied_views_cpu.pt"
has "diff lists names only in A" "^- fc1.weight" out
expect 0 "diff of a file and its to-cpu output" "$T" diff -q "$W/m.pt" "$W/m.cpu.pt"
expect 1 "diff --strict sees the device" "$T" diff -q --strict "$W/m.pt" "$W/m.cpu.pt"
expect 2 "diff without B" "$T" diff "$W/m.pt"
one_line "diff without B: one line"
expect 2 "diff with a bad --atol" "$T" diff --atol nan "$W/m.pt" "$W/m.pt"
expect 5 "diff of a missing file" "$T" diff "$W/m.pt" "$W/nope.pt"
one_line "diff of a missing file: one line"
expect 3 "diff of something that is not a checkpoint" "$T" diff "$W/m.pt" "$W/text.pt"
expect 3 "diff of a truncated download" "$T" diff "$W/m.pt" "$W/trunc.pt"

# --help and the man page name the same options
for cmd in inspect to-cpu to-cuda convert diff devices; do
    "$T" "$cmd" --help >"$W/help" 2>/dev/null || { "$T" --help | grep -q " $cmd " || continue; }
    for opt in $(grep -o -- '--[a-z][a-z0-9-]*' "$W/help" | sort -u); do
        if grep -q -- "$(printf '%s' "$opt" | sed 's/-/\\\\-/g')" "$MAN" || grep -q -- "$opt" "$MAN"; then
            ok "man page documents $cmd $opt"
        else
            bad "man page lacks $cmd $opt"
        fi
    done
    grep -q "^\.SS $cmd" "$MAN" && ok "man page has a section for $cmd" || bad "man page has no section for $cmd"
done
for st in 0 1 2 3 4 5; do
    grep -q "^\.B $st\$\|^\.IP $st\b\|^$st " "$MAN" && ok "man page lists exit status $st" || bad "man page lacks exit status $st"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
