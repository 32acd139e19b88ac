# 'tensorctl help CMD' is CMD's --help (as git help), on stdout
"$T" help inspect >"$W/a"
"$T" inspect --help >"$W/b"
cmp "$W/a" "$W/b"
head -1 "$W/a"
