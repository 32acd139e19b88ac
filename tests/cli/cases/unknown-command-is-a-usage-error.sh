# an unknown command: exit 2, named, then the usage
"$T" frobnicate
