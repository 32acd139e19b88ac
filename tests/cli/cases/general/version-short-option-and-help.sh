# -V is --version, and tensorctl --help names both
"$T" -V >"$W/v"
"$T" --version | cmp - "$W/v"
"$T" --help | grep -- '--version'
cat "$W/v"
