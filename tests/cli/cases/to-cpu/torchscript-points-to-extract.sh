# a TorchScript archive is not rewritten whole (its code would be lost): extract is named
rc=0
"$T" to-cpu --allow-unsafe "$S/torchscript_traced.pt" -o "$W/x.pt" || rc=$?
absent "$W/x.pt"
exit "$rc"
