# a global's name is judged whole however long it is: a torch zip naming mymod.CCC... (1,200 Cs)
# is not admitted by --safe-globals naming its first 1,099 characters (names were once cut there,
# and that admitted it), and is admitted by its whole name
"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import hostile as H
obj = H.op_global("mymod", "C" * 1200) + b")\x81"
pkl = H.state_dict(H.dict_of([("w", H.tensor()), ("cfg", obj)]))
open(sys.argv[2], "wb").write(H.torch_zip(pkl, {"0": H.FOUR_FLOATS}))' "$H/../hostile" "$W/long.pt"
c=$(printf 'C%.0s' $(seq 1200))
cut=$(printf 'C%.0s' $(seq 1093))
rc=0
"$T" inspect -q --safe-globals "mymod.$cut" "$W/long.pt" >/dev/null 2>&1 || rc=$?
echo "first 1,099 characters admitted: exit $rc"
"$T" inspect -q --safe-globals "mymod.$c" "$W/long.pt"
