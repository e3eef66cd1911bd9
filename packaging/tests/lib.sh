# Sourced by the packaging tests. BUILD (set by tests/run-tests.sh) is the build folder.
BUILD=${BUILD:-build}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top" || exit 1
die() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
# Packaging a sanitizer build is pointless: the packages are built from the plain one.
skip_sanitizer_build() {
	if [ "$(basename "$BUILD")" = build-san ] ||
		ldd "$BUILD/braid" 2>/dev/null | grep -q -E 'libasan|libubsan'; then
		skip "packaging tests run in the plain pass, not under SAN=1 ($BUILD)"
	fi
}
need_root() { # what for
	[ "$(id -u)" -eq 0 ] || skip "$1 needs root (chroot, mounts); run as root"
}
