#!/usr/bin/env bash
# Print the path of a cached fresh Debian 12 root (debootstrap --variant=minbase) as a
# tarball, building it when absent. Shared by the fresh-install test (a chroot) and the
# container test (podman import). The cache lives outside the repository:
# BRAID_ROOTFS_CACHE (default /var/cache/braid-test). First build: debootstrap from
# BRAID_DEBIAN_MIRROR (default http://deb.debian.org/debian), about 2-4 minutes.
set -euo pipefail
cache=${BRAID_ROOTFS_CACHE:-/var/cache/braid-test}
mirror=${BRAID_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${BRAID_DEBIAN_SUITE:-bookworm}
tar="$cache/$suite-minbase.tar"
if [ -s "$tar" ]; then
	echo "$tar"
	exit 0
fi
command -v debootstrap >/dev/null || { echo "rootfs: debootstrap is not installed" >&2; exit 1; }
mkdir -p "$cache"
# The lock keeps two tests (or two CI passes) from building it at once.
exec 9>"$cache/.lock"
flock 9
[ -s "$tar" ] && { echo "$tar"; exit 0; }
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "rootfs: debootstrap --variant=minbase $suite from $mirror (once; cached in $tar)" >&2
debootstrap --variant=minbase "$suite" "$work/root" "$mirror" >"$work/log" 2>&1 ||
	{ tail -n 20 "$work/log" >&2; echo "rootfs: debootstrap failed" >&2; exit 1; }
# apt in the root and in an image made from it: the same mirror, plus updates and security
cat >"$work/root/etc/apt/sources.list" <<SRC
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
SRC
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
tar -C "$work/root" --numeric-owner -cf "$work/root.tar" .
mv "$work/root.tar" "$tar"
echo "$tar"
