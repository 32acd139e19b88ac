#!/bin/sh
# Everything that needs a GPU, in one go, on a machine that has one: a CUDA
# build, the tests that skip elsewhere (the kernels against the reference on
# every pair; --engine cpu and --engine cuda writing identical files), the
# kernels' bandwidth against the device's copy bandwidth, and the end-to-end
# benchmark when torch is there to make its checkpoint.
#
# usage: bench/gpu_check.sh [BUILDDIR]     (default build-gpu)
# Writes the results on stdout as markdown; exits non-zero when a check fails.
set -eu
cd "$(dirname "$0")/.."
b=${1:-build-gpu}

if [ ! -f "$b/build.ninja" ]; then
    meson setup "$b" -Dcuda=enabled -Dbuildtype=release >/dev/null
fi
ninja -C "$b" >/dev/null
"$b/tensorctl" devices

echo "## CUDA checks"
rc=0
meson test -C "$b" --print-errorlogs cast-cuda engines-agree || rc=1
"$b/tests/cast/test_cast_cuda" | tail -n 1

echo
echo "## CUDA kernels"
"$b/tests/cast/test_cast_cuda" --bench | grep '^|' || rc=1

if "${BENCH_PYTHON:-/usr/bin/python3}" -c 'import torch' 2>/dev/null; then
    echo
    bench/bench.sh "$b/tensorctl" || rc=1
else
    echo
    echo "(no torch here: the end-to-end benchmark needs it to make its checkpoint)"
fi
exit $rc
