# a GGUF file (a split one too: one checkpoint in several files) converted into a folder is one file
# there under its name, as any other input; --max-shard-size (or an index OUT) makes a set
mkdir out
"$T" convert -q "$S/gguf/tiny-llama-f16.gguf" out/ --format safetensors
"$T" convert -q "$S/gguf/tiny-llama-q8_0-split-00001-of-00003.gguf" out/ --format safetensors
"$T" convert -q "$S/gguf/tiny-llama-f16.gguf" out/set/ --format safetensors --max-shard-size 50KB
ls out out/set
