# an unknown command (nothing like any command): exit 2, named, a pointer to the list
"$T" frobnicate
