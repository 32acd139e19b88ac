# test without a FILE: a usage error naming the command's help
"$T" test
