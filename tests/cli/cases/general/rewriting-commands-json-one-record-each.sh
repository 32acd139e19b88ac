# --json of to-cpu, to-cuda, convert, extract and consolidate: instead of the "wrote" line, one JSON object
# on one line on stdout (input, output, files, tensors, bytes, tensor_bytes, seconds), bytes the files'
# sizes on disk; a run that fails gives its error and exit status instead. Each line parsed by json.
check() { # the lines on stdin: one JSON document each, its fields printed (seconds checked, not shown)
    "$PY" -c '
import json, os, sys
text = sys.stdin.read()
assert text.endswith("\n") and text.count("\n") == 1, "not one line: %r" % text
d = json.loads(text)
if d["exit_status"] == 0:
    assert isinstance(d["seconds"], float) and d["seconds"] >= 0, d
    assert set(d) == {"command", "input", "output", "files", "tensors", "bytes", "tensor_bytes", "seconds",
                      "exit_status"}, sorted(d)
    out = d["output"]
    folder = os.path.dirname(out)
    on_disk = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)) if d["files"] > 1 \
        else os.path.getsize(out)
    assert on_disk == d["bytes"], (on_disk, d["bytes"])
    print(d["command"], os.path.basename(d["input"]), out, d["files"], d["tensors"], d["bytes"], d["tensor_bytes"])
else:
    assert set(d) == {"command", "input", "output", "error", "exit_status"}, sorted(d)
    print(d["command"], os.path.basename(d["input"]), d["output"], "error %d: %s" % (d["exit_status"], d["error"]))
'
}
"$T" to-cpu --json "$S/tiny_mlp_cuda0.pt" -o cpu.pt | check
"$T" to-cuda --json "$S/tiny_mlp_cuda0.pt" -o cuda.pt | check
mkdir set
"$T" to-cpu --json "$S/sharded/pytorch_model.bin.index.json" -o set/ | check
"$T" convert --json "$S/optimizer_ckpt_cuda1.pt" w.safetensors 2>/dev/null | check
"$T" extract --json "$S/lightning_dp_cpu.ckpt" -o e.pt 2>/dev/null | check
"$T" consolidate --json "$S/dcp/ws2_sharded" -o c.safetensors 2>/dev/null | check
rc=0; "$T" convert --json "$S/tiny_mlp_cuda0.pt" cpu.pt >fail.json || rc=$?
check <fail.json
exit "$rc"
