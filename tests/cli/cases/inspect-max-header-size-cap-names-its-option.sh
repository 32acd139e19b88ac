# a safetensors header over --max-header-size is refused, naming the option
"$T" inspect --max-header-size 64 "$C/torch-2.14/lm.safetensors"
