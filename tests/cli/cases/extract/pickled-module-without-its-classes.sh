# torch.save(model) whose classes' module no longer exists: named as state_dict() names them
"$T" extract "$S/pickled_module_cuda0.pt" -o "$W/m.pt"
"$T" inspect "$W/m.pt" | grep -E '^(embed|heads|blocks\.0\.ff\.0|half)\.' | cut -c1-40
