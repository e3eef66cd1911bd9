#!/usr/bin/env bash
# Partitions (NCCL_IB_PKEY, docs/ib.md): braid's QPs use the P_Key at the index
# BRAID_IB_PKEY / NCCL_IB_PKEY names, as NCCL's IB transport does. Over softverbs' InfiniBand
# device, whose P_Key table each process sets with SOFTVERBS_PKEYS:
#   - both ranks on one partition at index 1: data moves (every byte checked);
#   - the ranks on two partitions: connect fails on both sides with a WARN naming both
#     P_Keys, within the scenario's bounded waits, no hang;
#   - an index at an empty table entry: the port is not used, with a WARN.
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svib0:ib:1 BRAID_IB_HCA==svib0 BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=WARN
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
dir=$SV_FABRIC.run
IB_CLEANUP+=('rm -rf "$dir"')

pair() { # SCENARIO PKEYS_A PKEYS_B: run both roles, logs in $dir/{a,b}.log; rc of a and b
	rm -rf "$dir" && mkdir -p "$dir"
	SOFTVERBS_PKEYS=$2 NCCL_IB_PKEY=1 timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" \
		--api 11 --scenario "$1" --role a --dir "$dir" >"$dir/a.log" 2>&1 &
	local pa=$!
	SOFTVERBS_PKEYS=$3 NCCL_IB_PKEY=1 timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" \
		--api 11 --scenario "$1" --role b --dir "$dir" >"$dir/b.log" 2>&1
	rb=$?
	wait $pa
	ra=$?
}

echo "== one partition (0x8001 at index 1 on both ranks)"
pair tiny svib0:0xffff/0x8001 svib0:0xffff/0x8001
[ $ra = 0 ] && [ $rb = 0 ] || { bad "same partition: rc a=$ra b=$rb"; tail -5 "$dir"/*.log; }

echo "== the QPs use the key at index 1, not at 0 (0xffff and 0x8002 at index 0 cannot talk)"
pair tiny svib0:0xffff/0x8001 svib0:0x8002/0x8001
[ $ra = 0 ] && [ $rb = 0 ] || { bad "index 1 on both, index 0 differs: rc a=$ra b=$rb"; tail -5 "$dir"/*.log; }

echo "== a full and a limited member of one partition (0x8001, 0x0001)"
pair tiny svib0:0xffff/0x8001 svib0:0xffff/0x0001
[ $ra = 0 ] && [ $rb = 0 ] || { bad "full + limited member: rc a=$ra b=$rb"; tail -5 "$dir"/*.log; }

echo "== two partitions (0x8001 against 0x8002)"
start=$(date +%s)
pair tiny svib0:0xffff/0x8001 svib0:0xffff/0x8002
[ $ra != 0 ] && [ $rb != 0 ] || bad "different partitions: both sides must fail (rc a=$ra b=$rb)"
[ $ra -lt 124 ] && [ $rb -lt 124 ] || bad "different partitions: a side hung (rc a=$ra b=$rb)"
grep -hq "P_Key 0x800[12] and ours 0x800[12] (index 1 on svib0:1) are not in one partition" \
	"$dir"/a.log "$dir"/b.log || { bad "no WARN naming both P_Keys"; tail -5 "$dir"/*.log; }
echo "  failed as it should in $(($(date +%s) - start)) s"

echo "== an index at an empty entry of the P_Key table"
SOFTVERBS_PKEYS=svib0:0xffff/0x8001 NCCL_IB_PKEY=5 NCCL_DEBUG=INFO BRAID_BACKEND=ib \
	timeout 60 "$BUILD/tests/ib/gdr-probe" "$PLUGIN_SO" 11 >"$SV_FABRIC.out" 2>"$SV_FABRIC.err"
grep -q "NCCL_IB_PKEY=5 names an empty P_Key table entry on svib0:1; the port is not used" \
	"$SV_FABRIC.err" || { bad "no WARN for the empty P_Key entry"; tail -5 "$SV_FABRIC.err"; }
grep -q '^init=ncclSuccess' "$SV_FABRIC.out" && bad "init succeeded with no usable port"

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: P_Keys as NCCL_IB_PKEY says; partitions kept apart with a clear error"
