# a Hugging Face cache: the snapshot's symlinks are judged under their own names, each blob once;
# the blobs themselves are not listed (with --all they are, as the same file)
mkdir -p c/blobs c/snapshots/r1 c/snapshots/r2
cp "$S/tiny_mlp_cuda0.pt" c/blobs/aaaa
printf "cposix\nsystem\n(S'true'\ntR." >c/blobs/bbbb
ln -s ../../blobs/aaaa c/snapshots/r1/pytorch_model.bin
ln -s ../../blobs/aaaa c/snapshots/r2/pytorch_model.bin
ln -s ../../blobs/bbbb c/snapshots/r2/training_args.bin
"$T" scan -q c || echo "exit $?"
"$T" scan --all --json c | "$PY" -c '
import json, sys
for line in sys.stdin:
    o = json.loads(line)
    if "summary" not in o:
        print(o["verdict"], o["path"], o["reason"] if o["verdict"] == "skipped" else "")
'
# the summary counts them as other names of files judged, not as files that are no model files
"$T" scan c | grep 'judged:'
