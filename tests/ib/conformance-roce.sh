#!/usr/bin/env bash
# The conformance suite, unchanged, on the ib backend over softverbs' RoCE device
# (svroce0), both sides in this network namespace.
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
"$CONF_BIN" --plugin "$PLUGIN_SO" "$@" || exit 1
# abort-close is named-only (docs/contract.md): the whole suite above, then it
[ $# -gt 0 ] || exec "$CONF_BIN" --plugin "$PLUGIN_SO" --scenario abort-close
