#!/usr/bin/env bash
# Conformance over libfabric's tcp;ofi_rxm provider on the loopback interface.
set -u
. "$(dirname "$0")/lib.sh"
fi_info -p tcp >/dev/null 2>&1 || skip "libfabric has no tcp provider (fi_info -p tcp)"
export BRAID_BACKEND=ofi BRAID_OFI_PROVIDER='tcp;ofi_rxm' BRAID_SOCKET_IFNAME=lo
export FI_TCP_IFACE=lo
"$CONF_BIN" --plugin "$PLUGIN_SO" "$@" || exit 1
# abort-close is named-only (docs/contract.md): the whole suite above, then it
[ $# -gt 0 ] || exec "$CONF_BIN" --plugin "$PLUGIN_SO" --scenario abort-close
