#!/usr/bin/env bash
# NCCL_IB_ROCE_VERSION_NUM (docs/ib.md): the RoCE version of the GID braid picks, as NCCL's
# IB transport. softverbs' RoCE port has its IPv4 address as RoCEv1 (index 2) and RoCEv2
# (index 3): 1 must pick index 2 and still move data (every byte checked), the default 3.
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=INFO
log=$SV_FABRIC.log
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }

for v in 1 2 unset; do
	want=$([ $v = 1 ] && echo "GID 2 ::ffff:[0-9.]* (RoCEv1)" || echo "GID 3 ::ffff:[0-9.]* (RoCEv2)")
	if [ $v = unset ]; then unset NCCL_IB_ROCE_VERSION_NUM; else export NCCL_IB_ROCE_VERSION_NUM=$v; fi
	timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario tiny >"$log" 2>&1 ||
		bad "NCCL_IB_ROCE_VERSION_NUM=$v: the run failed: $(grep FAIL "$log" | head -3)"
	grep -q "device 0 = svroce0:1, RoCE, .*$want" "$log" ||
		bad "NCCL_IB_ROCE_VERSION_NUM=$v: want $want, got: $(grep -o 'GID [0-9]* [^ ]* ([^)]*)' "$log" | head -1)"
	echo "  NCCL_IB_ROCE_VERSION_NUM=$v: $(grep -o 'GID [0-9]* [^ ]* ([^)]*)' "$log" | head -1)"
done
[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: the GID's RoCE version follows NCCL_IB_ROCE_VERSION_NUM"
