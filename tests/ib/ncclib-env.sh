#!/usr/bin/env bash
# NCCL_IB_* variables braid does not honour are not ignored in silence (docs/ib.md): with
# the ib backend, init logs one WARN for each set variable whose loss changes behaviour
# (NCCL_IB_ROUTABLE_FLID_GID_INDEX) and one INFO for each tunable (NCCL_IB_OOO_RQ); an honoured one
# (NCCL_IB_TC) and an unset one log nothing. The plugin is loaded as NCCL loads it.
set -u
. "$(dirname "$0")/lib.sh"
PROBE=$BUILD/tests/ib/gdr-probe
need "$PROBE"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
out=$SV_FABRIC.out err=$SV_FABRIC.err
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
count() { grep -c -- "$1" "$err"; }

NCCL_DEBUG=INFO NCCL_IB_ROUTABLE_FLID_GID_INDEX=2 NCCL_IB_OOO_RQ=1 NCCL_IB_TC=106 \
	timeout 60 "$PROBE" "$PLUGIN_SO" 11 >"$out" 2>"$err" || bad "the probe failed: $(tail -3 "$err")"
[ "$(count 'NCCL_IB_ROUTABLE_FLID_GID_INDEX=2 is set, and braid does not honour it')" = 1 ] ||
	bad "want one WARN for NCCL_IB_ROUTABLE_FLID_GID_INDEX"
grep "NCCL_IB_ROUTABLE_FLID_GID_INDEX=2 is set" "$err" | grep -q WARN || bad "NCCL_IB_ROUTABLE_FLID_GID_INDEX's line is not a WARN"
[ "$(count 'NCCL_IB_OOO_RQ=1 is set, and braid does not read it')" = 1 ] ||
	bad "want one INFO for NCCL_IB_OOO_RQ"
[ "$(count 'NCCL_IB_TC=')" = 0 ] || bad "NCCL_IB_TC is honoured: no line for it"
grep -q '^init_warns=1$' "$out" || bad "init logged $(grep init_warns "$out") WARNs, want 1"

NCCL_DEBUG=INFO timeout 60 "$PROBE" "$PLUGIN_SO" 11 >"$out" 2>"$err" || bad "the probe failed"
[ "$(count 'is set, and braid does not')" = 0 ] || bad "a line with no NCCL_IB_* variable set"
sed 's/^/  | /' "$err" | grep -E 'NCCL_IB|init_warns' || true

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: NCCL_IB_* variables set and not honoured are reported once each"
