# scan without a PATH: a usage error naming the command
"$T" scan
