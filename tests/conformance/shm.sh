#!/usr/bin/env bash
# Conformance over libfabric's shm provider (both sides on this host).
set -u
. "$(dirname "$0")/lib.sh"
fi_info -p shm >/dev/null 2>&1 || skip "libfabric's shm provider is not usable here (fi_info -p shm)"
export BRAID_BACKEND=ofi BRAID_OFI_PROVIDER=shm BRAID_SOCKET_IFNAME=lo
# Every iflush reads the receive back (net_ofi/ofi_flush.c), as it does for GPU memory,
# so that the whole suite (soak's random flushes, aborts, kills) runs with flushes in
# flight; tcp.sh runs the default, where host memory has nothing to flush.
export BRAID_OFI_FLUSH=${BRAID_OFI_FLUSH:-always}
# libfabric 1.17's shm leaves its region (/dev/shm/PID:0:0, 16 MiB each) behind when a
# process is killed, as the kill scenarios do: remove those of this run's dead processes
# so that repeated runs do not fill /dev/shm.
mark=$(mktemp /tmp/braid-shm-mark.XXXXXX)
"$CONF_BIN" --plugin "$PLUGIN_SO" "$@"
rc=$?
# abort-close is named-only (docs/contract.md): the whole suite above, then it
if [ $rc -eq 0 ] && [ $# -eq 0 ]; then
	"$CONF_BIN" --plugin "$PLUGIN_SO" --scenario abort-close
	rc=$?
fi
for f in $(find /dev/shm -maxdepth 1 -newer "$mark" -regex '.*/[0-9]+:[0-9]+:[0-9]+' 2>/dev/null); do
	pid=${f##*/}
	pid=${pid%%:*}
	kill -0 "$pid" 2>/dev/null || rm -f "$f"
done
rm -f "$mark"
exit $rc
