# a safetensors header over --max-header-size is refused, naming the option
"$T" inspect --max-header-size 64 "$S/corpus/torch-2.15/lm.safetensors"
