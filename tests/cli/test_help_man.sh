#!/bin/sh
# --help and the man page name the same options: every option a command's --help
# lists is documented in man/tensorctl.1, every command has a section there, and
# the exit statuses 0-4 are listed. Fails when it checked no option at all.
# usage: test_help_man.sh TENSORCTL MANPAGE
T=$1 MAN=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0 opts=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
[ -r "$MAN" ] || { echo "FAIL no man page at $MAN"; exit 1; }

for cmd in inspect to-cpu to-cuda convert devices; do
    if ! "$T" "$cmd" --help >"$W/help" 2>"$W/err"; then
        bad "$cmd --help failed: $(head -c 300 "$W/err")"
        continue
    fi
    for opt in $(grep -o -- '--[a-z][a-z0-9-]*' "$W/help" | sort -u); do
        opts=$((opts + 1))
        if grep -q -- "$(printf '%s' "$opt" | sed 's/-/\\\\-/g')" "$MAN" || grep -q -- "$opt" "$MAN"; then
            ok "man page documents $cmd $opt"
        else
            bad "man page lacks $cmd $opt"
        fi
    done
    grep -q "^\.SS $cmd" "$MAN" && ok "man page has a section for $cmd" || bad "man page has no section for $cmd"
done
for st in 0 1 2 3 4; do
    grep -q "^\.B $st\$\|^\.IP $st\b\|^$st " "$MAN" && ok "man page lists exit status $st" || bad "man page lacks exit status $st"
done

echo "$pass passed, $fail failed ($opts options from --help)"
if [ "$opts" -eq 0 ]; then
    echo "FAIL no command's --help listed an option: nothing was compared with the man page"
    exit 1
fi
[ "$fail" -eq 0 ]
