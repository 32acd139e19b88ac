# --max-shard-size splits a GGUF output as gguf-split names it; the first file opens the set
"$T" convert -q --max-shard-size 40KB "$S/gguf/tiny-llama-f16.gguf" "$W/m.gguf"
ls "$W"
"$T" inspect "$W/m-00001-of-00005.gguf" | head -1
