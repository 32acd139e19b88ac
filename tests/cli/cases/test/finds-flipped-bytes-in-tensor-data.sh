# four bytes flipped inside a storage of a torch zip: inspect reads only metadata (exit 0), test reads every byte and the record's CRC-32 says so (exit 3)
cp "$S/tiny_mlp_cuda0.pt" m.pt
"$PY" "$H/flip_bytes.py" m.pt /data/0 4
"$T" inspect -q m.pt || fail "inspect should not read tensor data"
"$T" test m.pt
