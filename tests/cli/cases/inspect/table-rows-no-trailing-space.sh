# inspect's report: no line ends with a space; one tensor and one storage are counted in the singular
"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import hostile as H
open(sys.argv[2], "wb").write(H.torch_zip(H.state_dict(H.dict_of([("w", H.tensor())])), {"0": H.FOUR_FLOATS}))' "$H/../hostile" "$W/one.pt"
"$T" inspect "$S/tiny_mlp_cuda0.pt" "$S/tied_views_cpu.pt" "$W/one.pt" >"$W/out"
! grep -n ' $' "$W/out" >&2 || fail "a line ends with a space"
grep -e '^1 tensor' -e '^bytes per device' "$W/out" | tail -2
