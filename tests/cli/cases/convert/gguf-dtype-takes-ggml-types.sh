# a GGUF output's --dtype takes the types gguf-py quantises; a K-quant is refused with where it comes from
"$T" convert --dtype Q4_K "$S/gguf/tiny-llama-f16.gguf" "$W/out.gguf"
