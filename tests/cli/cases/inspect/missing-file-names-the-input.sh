# a missing input: exit 1, one line whose subject is the input
"$T" inspect "$W/nope.pt"
