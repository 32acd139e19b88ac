#!/bin/sh
# check_setup.sh SETUP_SH WORKDIR: the promises of `./setup.sh test`, with stand-ins for meson and
# ninja (nothing is built or installed, so this runs in a second): an existing build folder is
# configured anew (tools installed since are found), both halves always run, the closing line
# "tests: N passed, N failed, N skipped" comes even when a half fails (its tests, its build or its
# meson setup), and the exit status is non-zero exactly when something failed. The real thing, in a
# new Debian root holding only a clone, is tests/fresh_root.sh (by hand: it takes an hour).
set -u
[ $# -eq 2 ] || { echo "usage: $0 SETUP_SH WORKDIR" >&2; exit 2; }
setup=$1
work=$2
rm -rf "$work"
mkdir -p "$work/bin" || exit 1
cp "$setup" "$work/setup.sh" || exit 1

# meson: records each call; `setup DIR` makes DIR look configured (fails when an argument is
# $FAKE_SETUP_FAIL); `test -C DIR` writes DIR/meson-logs/testlog.json with one result per word of
# $FAKE_<DIR> (default one OK) and exits 1 when one is FAIL, as meson test does
cat >"$work/bin/meson" <<'SH'
#!/bin/sh
echo "meson $*" >>"$FAKE_LOG"
case "$1" in
setup)
    for a in "$@"; do [ "$a" = "${FAKE_SETUP_FAIL:-}" ] && { echo "meson: cannot set up $a" >&2; exit 1; }; done
    shift
    [ "$1" = --reconfigure ] && shift
    mkdir -p "$1/meson-private" && : >"$1/meson-private/coredata.dat" ;;
test)
    dir=$3
    mkdir -p "$dir/meson-logs"
    : >"$dir/meson-logs/testlog.json"
    eval "res=\${FAKE_$(echo "$dir" | tr - _):-OK}"
    rc=0
    for r in $res; do
        echo "{\"name\": \"t\", \"result\": \"$r\"}" >>"$dir/meson-logs/testlog.json"
        [ "$r" = FAIL ] && rc=1
    done
    exit $rc ;;
esac
exit 0
SH
# ninja: records each call; fails for the folder $FAKE_NINJA_FAIL
cat >"$work/bin/ninja" <<'SH'
#!/bin/sh
echo "ninja $*" >>"$FAKE_LOG"
[ "$2" = "${FAKE_NINJA_FAIL:-}" ] && { echo "ninja: build stopped" >&2; exit 1; }
exit 0
SH
chmod +x "$work/bin/meson" "$work/bin/ninja"

fails=0
# case NAME EXPECTED-STATUS EXPECTED-CLOSING-LINE [ENV=VALUE...]: run ./setup.sh test
case_() {
    name=$1 want_rc=$2 want_line=$3
    shift 3
    : >"$work/log"
    (cd "$work" && env FAKE_LOG="$work/log" PATH="$work/bin:$PATH" TENSORCTL_NO_INSTALL=1 "$@" sh ./setup.sh test) \
        >"$work/out" 2>&1
    rc=$?
    line=$(grep '^tests: ' "$work/out" | tail -n 1)
    bad=""
    [ "$rc" -eq "$want_rc" ] || bad="$bad; exit $rc, expected $want_rc"
    [ "$line" = "$want_line" ] || bad="$bad; closing line '$line', expected '$want_line'"
    if [ -n "$bad" ]; then
        echo "FAIL $name${bad}"
        sed 's/^/    | /' "$work/out" "$work/log"
        fails=$((fails + 1))
    else
        echo "PASS $name (exit $rc; $line)"
    fi
}
# has NAME PATTERN: the last run's calls include a line matching PATTERN
has() {
    if grep -q -- "$2" "$work/log"; then echo "PASS $1"; else
        echo "FAIL $1: no call matching '$2'"; sed 's/^/    | /' "$work/log"; fails=$((fails + 1)); fi
}

case_ "both halves pass" 0 "tests: 5 passed, 0 failed, 1 skipped" FAKE_build="OK OK SKIP" FAKE_build_asan="OK OK OK"
has "a new build folder is set up" "^meson setup build\$"
has "the ASan/UBSan folder is set up with the sanitizers" "^meson setup build-asan -Db_sanitize=address,undefined "
case_ "a build set up before (by demo) is configured anew" 0 "tests: 2 passed, 0 failed, 0 skipped"
has "meson setup --reconfigure build" "^meson setup --reconfigure build\$"
has "meson setup --reconfigure build-asan" "^meson setup --reconfigure build-asan "
case_ "the first half fails: the second still runs" 1 "tests: 3 passed, 1 failed, 0 skipped" \
    FAKE_build="OK FAIL" FAKE_build_asan="OK OK"
has "the ASan/UBSan half ran after the first failed" "^meson test -C build-asan "
case_ "the ASan/UBSan half fails" 1 "tests: 2 passed, 2 failed, 0 skipped" FAKE_build_asan="OK FAIL FAIL"
case_ "a half whose build fails counts as one failure" 1 "tests: 1 passed, 1 failed, 0 skipped" \
    FAKE_NINJA_FAIL=build-asan
case_ "the first build fails: the second half still runs" 1 "tests: 1 passed, 1 failed, 0 skipped" \
    FAKE_NINJA_FAIL=build
has "the ASan/UBSan half ran after the first build failed" "^meson test -C build-asan "
rm -rf "$work/build-asan"
case_ "a half whose meson setup fails counts as one failure" 1 "tests: 1 passed, 1 failed, 0 skipped" \
    FAKE_SETUP_FAIL=build-asan
case_ "TENSORCTL_TEST_ARGS reach both runs" 0 "tests: 2 passed, 0 failed, 0 skipped" \
    TENSORCTL_TEST_ARGS="--timeout-multiplier 4 expect-corpus"
has "TENSORCTL_TEST_ARGS reach the first run" "^meson test -C build --print-errorlogs --timeout-multiplier 4 expect-corpus\$"
has "TENSORCTL_TEST_ARGS reach the second run" "^meson test -C build-asan .*--timeout-multiplier 4 expect-corpus\$"

if [ "$fails" -ne 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
