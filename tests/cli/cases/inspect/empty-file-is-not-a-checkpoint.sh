# an empty file: exit 3, one line naming the file
: >"$W/empty.pt"
"$T" inspect "$W/empty.pt"
