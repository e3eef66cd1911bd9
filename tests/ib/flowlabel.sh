#!/usr/bin/env bash
# QP-level ECMP entropy: with 4 QPs per connection on RoCEv2, every QP of the send comm
# gets a distinct, non-zero flow label and a distinct UDP source port, softverbs' fabric
# model uses exactly those ports, and a message above the split threshold spreads its
# bytes evenly over the 4 QPs. With BRAID_IB_FLOW_LABEL=0 the labels are 0 (NCCL's
# behaviour) and softverbs derives the ports from the QP numbers.
# softverbs' counts are read once the run is over, whole: SOFTVERBS_STATS_KEEP=1 keeps the
# processes' stats files and QP rows after they end, and softverbs-stat -a reads them. (A
# sample taken while perf ran could hold a few chunks on a loaded machine, and one chunk
# more on a QP then looked like an uneven split: issue 21.)
set -u
. "$(dirname "$0")/lib.sh"
need "$BRAID" "$STAT"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
export SOFTVERBS_UPLINKS=8 BRAID_IB_QPS_PER_CONN=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL
export BRAID_STRIPE=equal # the exact split below
log=$SV_FABRIC.log snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$log" "$snap" "$snap.tmp"')

ITERS=64 WARMUP=2 MSG=$((4 << 20))
run() { # BRAID_IB_FLOW_LABEL value
	rm -rf "${SV_FABRIC:?}"/*
	SOFTVERBS_STATS_KEEP=1 BRAID_IB_FLOW_LABEL=$1 timeout 60 "$BRAID" perf --backend ib \
		--bw-only --min $MSG --max $MSG --iters $ITERS --warmup $WARMUP >"$log" 2>&1 ||
		{ tail -n 20 "$log"; die "braid perf failed"; }
	"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
}

run 1
qps=$(ib_send_qps "$log" "$snap")
echo "send comm QPs (qpn remote_qpn flow_label sport):"; echo "$qps"
[ "$(echo "$qps" | wc -l)" -eq 4 ] || die "expected 4 QPs on the send comm"
echo "$qps" | awk '$3 == "0" { exit 1 }' || die "a QP has flow label 0"
[ "$(echo "$qps" | awk '{ print $3 }' | sort -u | wc -l)" -eq 4 ] || die "flow labels are not distinct"
[ "$(echo "$qps" | awk '{ print $4 }' | sort -u | wc -l)" -eq 4 ] || die "source ports are not distinct"
# softverbs' own view: same source ports for those QPNs.
echo "softverbs-stat -a, after the run:"; grep '^qp' "$snap"
while read -r qpn _ _ sport; do
	line=$(ib_qp_row "$snap" "$qpn") || die "softverbs-stat has no QP $qpn"
	sv_sport=$(echo "$line" | sed -E 's/.* sport=([0-9]+) .*/\1/')
	[ "$sv_sport" = "$sport" ] || die "QP $qpn: braid says sport $sport, softverbs uses $sv_sport"
done <<<"$qps"
# The split, from the whole run's counts. The QPs are lanes weighted by their measured
# goodput (issue 18; docs/ib.md), so the runs here take BRAID_STRIPE=equal, NCCL's even
# policy: a message above BRAID_IB_SPLIT_BYTES is cut into one equal (128-byte aligned)
# chunk per QP, so each of the 4 QPs carries one 1 MiB chunk of every 4 MiB message, and
# perf --bw-only sends nothing else on this comm: ITERS + WARMUP writes and as many MiB
# per QP. (Totals alone would hide a message cut unevenly. Exact counts do not.) That the
# weights follow the QPs' paths is tests/unit/test_stripe.c's (qp lanes) and
# tests/bench/qp-lanes.sh's.
echo "$qps" | awk '{ print $1 }' | while read -r qpn; do
	ib_qp_row "$snap" "$qpn" | sed -E 's/.* tx_bytes=([0-9]+) .* tx_msgs=([0-9]+) .*/\1 \2/'
done >"$snap.tmp"
awk -v n=$((ITERS + WARMUP)) -v chunk=$((MSG / 4)) '{ b[NR] = $1; m[NR] = $2; s += $1 } END {
	for (i = 1; i <= NR; i++) if (b[i] != n * chunk || m[i] != n) {
		printf "QP %d carried %d bytes in %d writes (of %d bytes), not %d in %d: not an even split\n",
			i, b[i], m[i], s, n * chunk, n
		bad = 1 }
	if (NR != 4 || bad) exit 1
	printf "split: %d bytes, %d in %d writes on each of %d QPs\n", s, n * chunk, n, NR }' "$snap.tmp" ||
	die "large messages are not split evenly over the QPs"

run 0
qps=$(ib_send_qps "$log" "$snap")
echo "BRAID_IB_FLOW_LABEL=0:"; echo "$qps"
echo "$qps" | awk '$3 != "0" { exit 1 }' || die "BRAID_IB_FLOW_LABEL=0 still set a label"
echo "flow labels: ok"
