# '--strip-prefix module.' as people type it (a value ending with '.' may follow as its own argument):
# the same as --strip-prefix=module.
"$T" convert -q "$S/fp32_for_cast.pt" "$W/a.safetensors" --strip-prefix model.
"$T" convert -q "$S/fp32_for_cast.pt" "$W/b.safetensors" --strip-prefix=model.
cmp "$W/a.safetensors" "$W/b.safetensors"
"$T" inspect --json "$W/a.safetensors" | grep -o '"name":"[^"]*"' | grep lin | sort
