# '--strip-prefix model' (no dot): 'model' is taken as a FILE, so the count of FILEs is wrong; the
# message says to write --strip-prefix=model
rc=0
"$T" convert "$S/fp32_for_cast.pt" "$W/a.safetensors" --strip-prefix model || rc=$?
absent "$W/a.safetensors"
exit "$rc"
