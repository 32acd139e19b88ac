# --kv with a value its type cannot hold
"$T" convert --kv llama.context_length=u16:70000 "$S/gguf/tiny-llama-f16.gguf" "$W/out.gguf"
