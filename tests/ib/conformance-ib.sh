#!/usr/bin/env bash
# The conformance suite, unchanged, on the ib backend over softverbs' InfiniBand device
# (svib0: LID addressing), both sides in this network namespace.
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svib0:ib:1 BRAID_IB_HCA==svib0 BRAID_SOCKET_IFNAME=lo
"$CONF_BIN" --plugin "$PLUGIN_SO" "$@"
