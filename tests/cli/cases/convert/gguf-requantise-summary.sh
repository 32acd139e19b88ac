# F16 llama -> Q8_0: 2-D weights quantised, norms kept F32; the summary says so
"$T" convert --dtype Q8_0 "$S/gguf/tiny-llama-f16.gguf" "$W/q8.gguf"
