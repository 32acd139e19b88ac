# inspect with no FILE: exit 2
"$T" inspect
