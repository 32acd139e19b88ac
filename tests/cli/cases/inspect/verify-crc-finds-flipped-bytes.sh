# inspect --verify-crc: the report, then the integrity test; flipped tensor bytes are exit 3 (with --json too, said on stderr)
cp "$S/tiny_mlp_cuda0.pt" m.pt
"$PY" "$H/flip_bytes.py" m.pt /data/1 4
rc=0; "$T" inspect --json --verify-crc m.pt >out.json || rc=$?
"$PY" -c "import json,sys; json.load(open(sys.argv[1]))" out.json || fail "stdout is not one JSON document"
exit "$rc"
