#!/bin/sh
# One-command set-up on Debian 12 (as root, or with sudo available).
#   ./setup.sh demo   install what is missing, build, inspect and convert a bundled sample
#   ./setup.sh test   install what is missing, build, run the whole test suite
# Set TENSORCTL_NO_INSTALL=1 to skip the package installation.
set -eu
cd "$(dirname "$0")"
what=${1:-demo}

packages="build-essential meson ninja-build pkg-config libcjson-dev zlib1g-dev libssl-dev libarchive-dev libcriterion-dev"
test_packages="python3 python3-torch python3-numpy python3-joblib python3-dill p7zip-full clang libclang-rt-dev valgrind xfsprogs btrfs-progs unzip"

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

build() {
    [ -d build ] || meson setup build
    ninja -C build
}

case "$what" in
demo)
    install $packages
    build
    out=$(mktemp -d)
    ./build/tensorctl inspect sample_models/tiny_mlp_cuda0.pt
    ./build/tensorctl to-cpu sample_models/tiny_mlp_cuda0.pt -o "$out/tiny_mlp.cpu.pt"
    ./build/tensorctl inspect "$out/tiny_mlp.cpu.pt"
    rm -rf "$out"
    ;;
test)
    install $packages $test_packages
    build
    meson test -C build --print-errorlogs
    # the same suite with AddressSanitizer and UndefinedBehaviorSanitizer
    [ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled
    ninja -C build-asan
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-asan --print-errorlogs
    # one closing line for both runs
    python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
import json, sys
n = {"OK": 0, "FAIL": 0, "SKIP": 0}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line).get("result", "")
        key = "OK" if r in ("OK", "EXPECTEDFAIL") else "SKIP" if r == "SKIP" else "FAIL"
        n[key] += 1
print("tests: %d passed, %d failed, %d skipped" % (n["OK"], n["FAIL"], n["SKIP"]))
PY
    ;;
*)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
