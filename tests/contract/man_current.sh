#!/bin/sh
# The committed man page is what the command tables and man/tensorctl.1.in give.
# usage: man_current.sh GENERATED COMMITTED
if cmp -s "$1" "$2"; then
    echo "man page current"
    exit 0
fi
diff -u "$2" "$1" | head -40
echo "man/tensorctl.1 differs from the one the option tables give: cp $1 $2" >&2
exit 1
