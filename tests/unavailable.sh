#!/bin/sh
# unavailable.sh STATUS MESSAGE...: stands in for a test whose tool or library is missing
# from this build (meson registers it instead of dropping the test), so that a suite never
# vanishes without a word. Prints the message and exits STATUS: 1 (a failure) for a missing
# dependency; 77 (meson's skip) only where the test cannot run in this kind of build at all.
status=$1
shift
if [ "$status" -eq 77 ]; then echo "SKIP: $*"; else echo "FAIL: $*"; fi
exit "$status"
