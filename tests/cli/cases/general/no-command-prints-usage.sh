# no command: exit 2 and the usage on stderr
"$T"
