# 'tensorctl help CMD' of a misspelt command: exit 2, with the command meant
"$T" help extarct
