# Shared by the conformance test scripts (sourced). They run from the repository root
# with BUILD in the environment; exit 0 pass, 77 skip (reason on the last line), else fail.

BUILD=${BUILD:-build}
CONF_BIN=$BUILD/tests/conformance/conformance
PLUGIN_SO=$BUILD/libnccl-net-braid.so
CONF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
need() { for f; do [ -e "$f" ] || die "$f is missing: run make first"; done; } # built files
# What the namespace tests need: root, ip(8), libfabric's tcp provider (else a SKIP).
netns_prereqs() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
	command -v ip >/dev/null || skip "no ip(8) (iproute2)"
	fi_info -p tcp >/dev/null 2>&1 || skip "libfabric has no tcp provider (fi_info -p tcp)"
}

need "$CONF_BIN" "$PLUGIN_SO"

# Under SAN=1 the plugin's leaks are failures; only libfabric's own (internal caches
# it never frees) are suppressed, by name, in lsan.supp.
export LSAN_OPTIONS="suppressions=$CONF_DIR/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

is_san_build() {
	ldd "$PLUGIN_SO" 2>/dev/null | grep -q 'libasan' || nm "$CONF_BIN" 2>/dev/null | grep -q '__asan_init'
}
