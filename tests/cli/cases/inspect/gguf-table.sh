# inspect of a GGUF: ggml types, stored bytes, metadata with arrays summarised, the GGUF verdict
"$T" inspect "$S/gguf/align-64.gguf"
