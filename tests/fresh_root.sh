#!/bin/sh
# fresh_root.sh [WORKDIR]: the README's promise end to end, by hand. Not run by meson or CI: it
# downloads a Debian system and builds and tests everything twice (plain and ASan/UBSan), which
# takes an hour or more on two cores.
#
# As root: makes a new Debian 12 (bookworm) root with debootstrap (minbase, from Debian's mirror),
# puts a clone of this checkout's HEAD in it at /root/tensorctl (committed work only, mode 0700
# like a user's home, nothing beside it: no ../shared), and there follows the README in its
# order: ./setup.sh demo, then ./setup.sh test. Each is timed; their output goes to
# WORKDIR/demo.log and WORKDIR/test.log. Exit 0 when both pass.
#
#   WORKDIR                 default /var/tmp/tensorctl-fresh-root; the root is WORKDIR/root, made anew
#   FRESH_ROOT_BASE=DIR     start from a copy of a bookworm root made before (debootstrap's download
#                           and unpacking then need not be repeated); it is never modified
#   FRESH_ROOT_MIRROR=URL   default http://deb.debian.org/debian
#   FRESH_ROOT_KEEP=1       leave WORKDIR/root in place afterwards (to look into a failure)
#
# /proc, /sys and /dev are mounted in the root for the tests (the loop devices of tests/reflink,
# /dev/shm); they are unmounted on the way out. The packages set-up installs come from the mirror.
set -eu
work=${1:-/var/tmp/tensorctl-fresh-root}
mirror=${FRESH_ROOT_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")/.." && pwd)
root=$work/root

[ "$(id -u)" -eq 0 ] || { echo "fresh_root.sh: run it as root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v git >/dev/null || { echo "fresh_root.sh: git is needed (apt-get install git)" >&2; exit 2; }
if ! command -v debootstrap >/dev/null && [ -z "${FRESH_ROOT_BASE:-}" ]; then
    echo "fresh_root.sh: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

mounted=""
cleanup() {
    for m in $mounted; do umount -l "$m" 2>/dev/null || true; done
    if [ "${FRESH_ROOT_KEEP:-0}" != 1 ] && [ -d "$root" ]; then
        # nothing may still be mounted under it before it is removed
        if ! grep -q " $root/" /proc/mounts; then rm -rf "$root"; else echo "fresh_root.sh: $root left: mounts remain"; fi
    fi
}
trap cleanup EXIT INT TERM

mkdir -p "$work"
rm -rf "$root"
t0=$(date +%s)
if [ -n "${FRESH_ROOT_BASE:-}" ]; then
    echo "fresh_root.sh: copying the bookworm root $FRESH_ROOT_BASE"
    cp -a "$FRESH_ROOT_BASE" "$root"
else
    echo "fresh_root.sh: debootstrap bookworm from $mirror"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
        { tail -n 20 "$work/debootstrap.log"; exit 1; }
fi
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "fresh_root.sh: the root took $(($(date +%s) - t0)) s"

# the clone: HEAD of this checkout, in a private home as a user's would be
chmod 0700 "$root/root"
git clone -q --no-hardlinks "$here" "$root/root/tensorctl"
echo "fresh_root.sh: cloned $(git -C "$root/root/tensorctl" log -1 --format='%h %s' | cut -c1-80)"
if [ -n "$(git -C "$here" status --porcelain --untracked-files=no)" ]; then
    echo "fresh_root.sh: note: uncommitted changes of $here are not in the clone"
fi

for m in proc sys dev dev/pts; do
    mkdir -p "$root/$m"
    case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sysfs "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount -t devpts devpts "$root/dev/pts" ;;
    esac
    mounted="$root/$m $mounted"
done

# step NAME: ./setup.sh NAME in the root, as root, with a clean environment; its time and status
status=0
step() {
    echo "fresh_root.sh: ./setup.sh $1 (log: $work/$1.log)"
    s=$(date +%s)
    rc=0
    chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM=dumb /bin/sh -c "cd /root/tensorctl && ./setup.sh $1" \
        >"$work/$1.log" 2>&1 || rc=$?
    e=$(($(date +%s) - s))
    echo "fresh_root.sh: ./setup.sh $1: exit $rc in ${e} s ($((e / 60)) min $((e % 60)) s)"
    [ $rc -eq 0 ] || { tail -n 40 "$work/$1.log"; status=1; }
}
step demo
[ $status -eq 0 ] && step test
grep '^tests: ' "$work/test.log" 2>/dev/null || true
exit $status
