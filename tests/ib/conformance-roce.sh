#!/usr/bin/env bash
# The conformance suite, unchanged, on the ib backend over softverbs' RoCE device
# (svroce0), both sides in this network namespace.
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
"$CONF_BIN" --plugin "$PLUGIN_SO" "$@" || exit 1
# abort-close is named-only (docs/contract.md): the whole suite above, then it, at INFO.
# Work still posted to a peer's QPs as it closes fails as the close's echo: once the
# peer's goodbye is in, such a completion error is said at INFO ("completion error after
# peer ... closed its comm", net_ib/ib_cq.c), not WARNed as a fault of the fabric; this
# scenario closes with requests in flight on every round, so some must come.
[ $# -gt 0 ] && exit 0
log=$(mktemp /tmp/braid-roce-abort.XXXXXX)
trap 'rm -f "$log"' EXIT
NCCL_DEBUG=INFO "$CONF_BIN" --plugin "$PLUGIN_SO" --scenario abort-close 2>"$log"
rc=$?
grep -v ' NCCL INFO ' "$log" | grep -v 'closed its comm before it' >&2
eched=$(grep -c 'NCCL INFO .*completion error after peer .* closed its comm' "$log")
warned=$(grep -c 'NCCL WARN .*completion error' "$log")
echo "abort-close: $eched completion errors after the peer's goodbye at INFO, $warned WARNed" \
	"(before it: $(grep -c 'NCCL WARN .*closed its comm before it' "$log") requests that can never complete)"
[ "$rc" -eq 0 ] || exit 1
[ "$eched" -gt 0 ] || { echo "FAIL: no completion error after the peer's goodbye said at INFO"; exit 1; }
