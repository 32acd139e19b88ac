# --names hf would give two tensors one name (one already named as the other maps to): refused, nothing written
"$T" convert -q --rename '^blk\.0\.attn_norm\.weight$=model.norm.weight' "$S/gguf/tiny-llama-f16.gguf" "$W/m.gguf"
rc=0; "$T" convert --names hf "$W/m.gguf" "$W/out.safetensors" || rc=$?
absent "$W/out.safetensors"; no_temporaries "$W"; exit "$rc"
