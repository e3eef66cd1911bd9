#!/usr/bin/env bash
# Devices of up to 8 NICs, as ncclNet v12 allows (NCCL_NET_MAX_DEVS_PER_NIC 8; 4 under v9
# to v11): 8 softverbs RoCE NICs fused into one device.
#   - v12, BRAID_MERGE of all 8: the conformance data scenarios pass with every byte
#     verified, and softverbs' per-device counts show every NIC carried data;
#   - v12, makeVDevice of 5 to 8 of them (props-v12): each fused, vProps listing them;
#   - v11, the same BRAID_MERGE: init refuses it with a WARN naming v11's limit of 4.
set -u
. "$(dirname "$0")/lib.sh"
need "$STAT"
names=(svroce0 svroce1 svroce2 svroce3 svroce4 svroce5 svroce6 svroce7)
devs=$(printf '%s:roce:1,' "${names[@]}")
hca=$(printf '%s,' "${names[@]}")
merge=$(printf '%s+' "${names[@]}")
export SOFTVERBS_DEVICES=${devs%,} BRAID_IB_HCA="=${hca%,}" BRAID_SOCKET_IFNAME=lo
log=$SV_FABRIC.log snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$log" "$snap"')
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }

echo "== v12, one device of the 8 NICs: data scenarios, every byte verified"
rm -rf "${SV_FABRIC:?}"/*
BRAID_MERGE=${merge%+} SOFTVERBS_STATS_KEEP=1 NCCL_DEBUG=INFO timeout 300 "$CONF_BIN" \
	--plugin "$PLUGIN_SO" --api 12 --scenario stream,groups,truncate,threads,abort-close \
	>"$log" 2>&1 || { grep -E 'FAIL|WARN' "$log" | head -n 20; bad "the scenarios failed"; }
grep -E '^(PASS|FAIL)' "$log" | sed 's/^/  /'
grep -q 'ib: send comm .* and more NICs ready, .*, 16 QP(s)' "$log" ||
	bad "no send comm over the fused device's 16 QPs"
"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
# each NIC's bytes in the process that sent the most
grep '^device ' "$snap" | sed -E 's/^device pid=([0-9]+) name=([^ ]+) .* tx_bytes=([0-9]+) .*/\1 \2 \3/' |
	awk '{ b[$1] += $3; n[$1 " " $2] = $3 } END {
		for (p in b) if (b[p] > best) { best = b[p]; pick = p }
		for (k in n) { split(k, a, " "); if (a[1] == pick) { printf "  %s: %d bytes\n", a[2], n[k]
			if (n[k] < best / 64) slack++; nics++ } }
		exit slack || nics != 8 }' || bad "every one of the 8 NICs must carry data"

echo "== v12, makeVDevice of 5 to 8 NICs"
rm -rf "${SV_FABRIC:?}"/*
timeout 60 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 12 --scenario props-v12 >"$log" 2>&1 ||
	{ tail -n 20 "$log"; bad "props-v12 failed"; }
grep -E 'devices fused into' "$log" | sed 's/^/  /'
[ "$(grep -c 'devices fused into' "$log")" = 4 ] || bad "want 5, 6, 7 and 8 NICs fused"

echo "== v11: a BRAID_MERGE device of 8 NICs is refused, naming the limit"
rm -rf "${SV_FABRIC:?}"/*
BRAID_MERGE=${merge%+} timeout 60 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario props \
	>"$log" 2>&1 && bad "v11 accepted a device of 8 NICs"
grep -q 'WARN.*device 0 has 8 NICs; a device holds at most 4 here (ncclNet v11' "$log" ||
	{ grep WARN "$log" | head -n 5; bad "no WARN naming v11's limit"; }

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: devices of 8 NICs under v12, 4 under v11"
