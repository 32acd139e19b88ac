# one tensor and two integers under 500-character keys, to .safetensors: the integers are dropped
# and the warning names them on one line, the second cut, with how many there are (this once
# overflowed the stack); the file is written
"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import hostile as H
pkl = H.state_dict(H.dict_of([("w", H.tensor()), ("a" * 500, H.op_int(1)), ("b" * 500, H.op_int(2))]))
open(sys.argv[2], "wb").write(H.torch_zip(pkl, {"0": H.FOUR_FLOATS}))' "$H/../hostile" "$W/long.pt"
"$T" convert "$W/long.pt" "$W/long.safetensors"
