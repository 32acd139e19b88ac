# a text file: exit 3, one line naming the file and the formats expected
printf 'hello world, not a model' >"$W/text.pt"
"$T" inspect "$W/text.pt"
