# a model folder holding two checkpoints (a safetensors set and a .bin set beside it): exit 2, both named
"$T" inspect "$S/sharded"
