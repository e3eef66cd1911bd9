#!/usr/bin/env bash
# The short scenarios over tcp;ofi_rxm under valgrind memcheck (plain build only):
# invalid accesses, uses of uninitialised memory and definite leaks fail the test.
set -u
. "$(dirname "$0")/lib.sh"
is_san_build && skip "valgrind runs on the plain build only (this is a sanitizer build)"
command -v valgrind >/dev/null || skip "valgrind is not installed"
fi_info -p tcp >/dev/null 2>&1 || skip "libfabric has no tcp provider (fi_info -p tcp)"
export BRAID_BACKEND=ofi BRAID_OFI_PROVIDER='tcp;ofi_rxm' BRAID_SOCKET_IFNAME=lo FI_TCP_IFACE=lo
# fork() children run under valgrind too; each reports its own errors in its exit status.
exec valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite \
	--errors-for-leak-kinds=definite --suppressions="$CONF_DIR/valgrind.supp" \
	"$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario quick,groups "$@"
