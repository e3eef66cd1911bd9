#!/usr/bin/env bash
# QPs as lanes (issue 18): one RoCE NIC, 4 QPs, 4 softverbs uplinks of which one runs at a
# quarter of the others' rate. A QP whose UDP source port hashes onto that uplink is a slow
# path, and the sender weighs its QPs by measured goodput like NICs (plugin/stripe.c): that
# QP must carry fewer bytes than any QP alone on a fast uplink, while BRAID_STRIPE=equal
# still cuts every message in four equal parts. Counts, not times: softverbs-stat -a after
# the run gives each QP's bytes and uplink. QP numbers, hence uplinks, differ each run: a
# run where the slow uplink carries no QP alone, or no fast one does, is run again (at
# most TRIES times).
set -u
. "$(dirname "$0")/lib.sh"
need "$BRAID" "$STAT"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
export SOFTVERBS_UPLINKS=4 BRAID_IB_QPS_PER_CONN=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL
export SOFTVERBS_UPLINK_RATE_MBPS="*:200,3:50"
log=$SV_FABRIC.log snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$log" "$snap"')
TRIES=${TRIES:-12} ITERS=128 WARMUP=2 MSG=$((4 << 20))

# run MODE: the send comm's data QPs as "uplink tx_bytes tx_msgs", one a line
run() {
	rm -rf "${SV_FABRIC:?}"/*
	SOFTVERBS_STATS_KEEP=1 BRAID_STRIPE=$1 timeout 120 "$BRAID" perf --backend ib --bw-only \
		--min $MSG --max $MSG --iters $ITERS --warmup $WARMUP >"$log" 2>&1 ||
		{ tail -n 20 "$log"; die "braid perf failed (BRAID_STRIPE=$1)"; }
	"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
	for q in $(ib_send_qps "$log" "$snap" | awk '{ print $1 }'); do
		ib_qp_row "$snap" "$q" |
			sed -E 's/.* uplink=([0-9]+) .* tx_bytes=([0-9]+) .* tx_msgs=([0-9]+) .*/\1 \2 \3/'
	done
}

echo "== BRAID_STRIPE=equal: every QP a quarter of every message"
qps=$(run equal)
echo "$qps" | sed 's/^/  uplink tx_bytes tx_msgs: /'
echo "$qps" | awk -v n=$((ITERS + WARMUP)) -v q=$((MSG / 4)) '
	$2 != n * q || $3 != n { bad = 1 } END { exit bad || NR != 4 }' ||
	die "BRAID_STRIPE=equal must cut each message in 4 equal parts"

echo "== adaptive (the default): the QP alone on the slow uplink 3 carries less"
for t in $(seq 1 "$TRIES"); do
	qps=$(run adaptive)
	# uplinks with one QP each: the slow one and the fast ones
	verdict=$(echo "$qps" | awk '{ n[$1]++; b[$1] = $2; s += $2 }
		END { slow = -1; fast = -1
		      for (u in n) if (n[u] == 1) {
			      if (u == 3) slow = b[u]
			      else if (fast < 0 || b[u] < fast) fast = b[u] }
		      if (slow < 0 || fast < 0) { print "retry"; exit }
		      printf "%s slow QP %d bytes, least fast lone QP %d bytes, of %d\n",
		             slow * 2 < fast ? "ok" : "bad", slow, fast, s }')
	[ "$verdict" = retry ] && continue
	echo "$qps" | sed 's/^/  uplink tx_bytes tx_msgs: /'
	echo "  run $t: ${verdict#* }"
	[ "${verdict%% *}" = ok ] || die "the QP on the slow uplink must carry under half a fast QP's bytes"
	echo "PASS: QPs weighted by goodput; BRAID_STRIPE=equal cuts evenly"
	exit 0
done
echo "SKIP: in $TRIES runs no QP was alone on the slow uplink with another alone on a fast one"
exit 77
