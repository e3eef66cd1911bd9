#!/usr/bin/env bash
# Conformance over libfabric's shm provider (both sides on this host).
set -u
. "$(dirname "$0")/lib.sh"
fi_info -p shm >/dev/null 2>&1 || skip "libfabric's shm provider is not usable here (fi_info -p shm)"
export BRAID_BACKEND=ofi BRAID_OFI_PROVIDER=shm BRAID_SOCKET_IFNAME=lo
exec "$CONF_BIN" --plugin "$PLUGIN_SO" "$@"
