#!/usr/bin/env bash
# The plugin loads on a host that has neither libfabric nor libibverbs: it links only
# libc-level libraries and hwloc, opens the network libraries at init, and says in one
# INFO line per backend which library it could not open (then init fails: no network).
set -u
so="$BUILD/libnccl-net-braid.so"
loader="$BUILD/tests/unit/load_plugin"
fail() { echo "FAIL: $*"; exit 1; }

needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "NEEDED: $needed"
for lib in $needed; do
	case "$lib" in
	libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|libhwloc.so.*|ld-linux*|libasan.so.*|libubsan.so.*) ;;
	*) fail "the plugin links $lib; only libc-level libraries and hwloc are allowed" ;;
	esac
done

command -v unshare >/dev/null && [ "$(id -u)" -eq 0 ] || { echo "needs root and unshare"; exit 77; }
unshare -m true 2>/dev/null || { echo "cannot create a mount namespace here"; exit 77; }

# Hide every copy of the two libraries in a private mount namespace.
hide=$(ldconfig -p | awk '/(libfabric|libibverbs)\.so\.1 /{ print $NF }' | sort -u)
[ -n "$hide" ] || echo "note: neither library is installed; nothing to hide"
out=$(unshare -m bash -c '
	for f in '"$(echo $hide)"'; do mount --bind /dev/null "$(readlink -f "$f")" || exit 3; done
	exec "$0" "$1"' "$loader" "$so" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "expected init to fail cleanly (exit 1), got $rc"
echo "$out" | grep -q "INFO.*ib backend not usable: cannot open libibverbs.so.1" ||
	fail "no INFO line naming libibverbs.so.1"
echo "$out" | grep -q "INFO.*ofi backend not usable: cannot open libfabric.so.1" ||
	fail "no INFO line naming libfabric.so.1"
echo "$out" | grep -q "WARN.*no usable network backend" || fail "no WARN saying why init failed"
echo "loads anywhere: ok"
