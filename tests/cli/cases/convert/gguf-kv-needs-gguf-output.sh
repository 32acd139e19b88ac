# --kv sets GGUF metadata: refused for another output
"$T" convert --kv general.name=x "$S/gguf/tiny-llama-f16.gguf" "$W/out.safetensors"
