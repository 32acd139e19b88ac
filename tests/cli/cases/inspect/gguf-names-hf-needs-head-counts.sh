# --names hf undoes the Q/K permutation with the head counts: a llama file without them is refused
"$T" inspect --names hf "$S/gguf/types.gguf"
