#!/bin/sh
# One-command set-up on Debian 12 (as root, or with sudo available).
#   ./setup.sh demo   install what is missing, build, inspect and convert a bundled sample
#   ./setup.sh test   install what is missing, build, run the whole test suite, then the same suite
#                     built with AddressSanitizer and UndefinedBehaviorSanitizer; both halves always
#                     run, a closing line counts them ("tests: N passed, N failed, N skipped") and
#                     the exit status is non-zero when anything failed
# Both also install the tools the README's walkthrough uses: man (man-db), jq and GNU parallel.
# Set TENSORCTL_NO_INSTALL=1 to skip the package installation; TENSORCTL_TEST_ARGS adds options to
# both runs of meson test (e.g. "--timeout-multiplier 4" on a loaded machine).
set -eu
cd "$(dirname "$0")"
what=${1:-demo}

packages="build-essential meson ninja-build pkg-config libcjson-dev zlib1g-dev libssl-dev libarchive-dev libcriterion-dev"
walkthrough_packages="man-db jq parallel"
test_packages="python3 python3-torch python3-numpy python3-joblib python3-dill p7zip-full clang libclang-rt-dev valgrind xfsprogs btrfs-progs unzip
    dpkg-dev debhelper python3-mesonpy python3-build python3-venv debootstrap"

install() {
    [ "${TENSORCTL_NO_INSTALL:-0}" = 1 ] && return 0
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "installing:$missing"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
}

# configure DIR [OPTIONS]: a new build folder, or an existing one configured anew, so that what
# was installed since (valgrind, clang, python3, Criterion) is found by the tests that need it
configure() {
    dir=$1
    shift
    if [ -f "$dir/meson-private/coredata.dat" ]; then
        meson setup --reconfigure "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
    else
        rm -rf "$dir"
        meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
    fi
    rm -f "$dir.setup.log"
}

# half DIR "MESON-SETUP-OPTIONS" "MESON-TEST-OPTIONS" [ENV=VALUE...]: configure and build DIR and
# run its whole suite; never stops the script (a half that cannot be set up or built counts as failed)
failed_halves=""
half() {
    dir=$1
    sargs=$2
    margs=$3
    shift 3
    rm -f "$dir/meson-logs/testlog.json"
    # shellcheck disable=SC2086
    if ! configure "$dir" $sargs; then
        echo "setup.sh: meson setup of $dir failed; its tests did not run" >&2
        failed_halves="$failed_halves $dir(setup)"
        return 0
    fi
    if ! ninja -C "$dir"; then
        echo "setup.sh: the build in $dir failed; its tests did not run" >&2
        failed_halves="$failed_halves $dir(build)"
        return 0
    fi
    # shellcheck disable=SC2086
    if ! env "$@" meson test -C "$dir" --print-errorlogs $margs ${TENSORCTL_TEST_ARGS:-}; then
        failed_halves="$failed_halves $dir"
    fi
}

case "$what" in
demo)
    install $packages $walkthrough_packages
    configure build
    ninja -C build
    out=$(mktemp -d)
    ./build/tensorctl inspect sample_models/tiny_mlp_cuda0.pt
    ./build/tensorctl to-cpu sample_models/tiny_mlp_cuda0.pt -o "$out/tiny_mlp.cpu.pt"
    ./build/tensorctl inspect "$out/tiny_mlp.cpu.pt"
    rm -rf "$out"
    ;;
test)
    install $packages $walkthrough_packages $test_packages
    half build "" ""
    # the same suite with AddressSanitizer and UndefinedBehaviorSanitizer
    # (instrumented code runs 2-3 times slower: so may each test)
    # Suite 'slow' runs in the plain half only: the package builds (each builds its own plain
    # binary) and block sharing on loop-mounted file systems (what it judges is the file system)
    half build-asan "-Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled" "--timeout-multiplier 3 --no-suite slow" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    # one closing line for both runs (a half whose build failed counts as one failure)
    command -v python3 >/dev/null || { echo "tests: python3 is needed to count them; failed:${failed_halves:- none}"; exit 1; }
    python3 - "$failed_halves" build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
import json, os, sys
n = {"OK": 0, "FAIL": 0, "SKIP": 0}
for path in sys.argv[2:]:
    if not os.path.exists(path):
        n["FAIL"] += 1
        continue
    for line in open(path):
        r = json.loads(line).get("result", "")
        key = "OK" if r in ("OK", "EXPECTEDFAIL") else "SKIP" if r == "SKIP" else "FAIL"
        n[key] += 1
print("tests: %d passed, %d failed, %d skipped" % (n["OK"], n["FAIL"], n["SKIP"]))
if sys.argv[1].strip():
    print("failed:%s" % sys.argv[1])
PY
    [ -z "$failed_halves" ]
    ;;
*)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
