#!/usr/bin/env bash
# QP-level ECMP entropy: with 4 QPs per connection on RoCEv2, every QP of the send comm
# gets a distinct, non-zero flow label and a distinct UDP source port, softverbs' fabric
# model uses exactly those ports (softverbs-stat, sampled live), and a message above the
# split threshold spreads its bytes evenly over the 4 QPs. With BRAID_IB_FLOW_LABEL=0 the
# labels are 0 (NCCL's behaviour) and softverbs derives the ports from the QP numbers.
set -u
. "$(dirname "$0")/lib.sh"
BRAID=$BUILD/braid STAT=$SV_DIR/softverbs-stat
[ -x "$BRAID" ] || die "$BRAID is missing: run make first"
[ -x "$STAT" ] || die "$STAT is missing: run make first"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
export SOFTVERBS_UPLINKS=8 BRAID_IB_QPS_PER_CONN=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL
log=$SV_FABRIC.log snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$log" "$snap" "$snap.tmp"')

run() { # BRAID_IB_FLOW_LABEL value
	rm -rf "$SV_FABRIC"/*
	BRAID_IB_FLOW_LABEL=$1 timeout 60 "$BRAID" perf --backend ib --bw-only --min 4M --max 4M \
		--iters 64 --warmup 2 >"$log" 2>&1 &
	local pid=$! best=0 tot
	: >"$snap"
	while kill -0 $pid 2>/dev/null; do
		"$STAT" >"$snap.tmp" 2>/dev/null
		tot=$(awk -F'[ =]' '/^uplink/ { s += $5 } END { print s + 0 }' "$snap.tmp")
		if [ "$tot" -gt "$best" ]; then best=$tot; cp "$snap.tmp" "$snap"; fi
		sleep 0.02
	done
	wait $pid || { tail -n 20 "$log"; die "braid perf failed"; }
}

# "ib: send comm to ... ready ..., 4 QP(s): 0xA->0xB fl 0xF sport S, ...": both processes
# have a send comm (perf's control messages go both ways); take the one that carried the
# data, by softverbs' byte counts.
qps_of_line() {
	sed -E 's/.*QP\(s\): //; s/:[0-9]+$//' | tr ',' '\n' |
		sed -E 's/^ *(0x[0-9a-f]+)->(0x[0-9a-f]+) fl (0x[0-9a-f]+|0) sport ([0-9]+).*/\1 \2 \3 \4/'
}
qp_bytes() { grep -E "^qp pid=[0-9]+ qpn=0x0*${1#0x} " "$snap" | sed -E 's/.* tx_bytes=([0-9]+) .*/\1/'; }
send_qps() {
	local best=-1 pick="" line q b
	while read -r line; do
		q=$(echo "$line" | qps_of_line)
		b=$(qp_bytes "$(echo "$q" | head -n 1 | awk '{ print $1 }')")
		[ "${b:-0}" -gt "$best" ] && { best=${b:-0}; pick=$q; }
	done < <(grep 'ib: send comm to .* ready' "$log")
	echo "$pick"
}

run 1
qps=$(send_qps)
echo "send comm QPs (qpn remote_qpn flow_label sport):"; echo "$qps"
[ "$(echo "$qps" | wc -l)" -eq 4 ] || die "expected 4 QPs on the send comm"
echo "$qps" | awk '$3 == "0" { exit 1 }' || die "a QP has flow label 0"
[ "$(echo "$qps" | awk '{ print $3 }' | sort -u | wc -l)" -eq 4 ] || die "flow labels are not distinct"
[ "$(echo "$qps" | awk '{ print $4 }' | sort -u | wc -l)" -eq 4 ] || die "source ports are not distinct"
# softverbs' own view: same source ports for those QPNs, and the bytes of the 4 MiB
# messages split evenly (each QP within 20% of a quarter).
echo "softverbs-stat:"; grep '^qp' "$snap"
total=0
while read -r qpn _ _ sport; do
	line=$(grep -E "^qp pid=[0-9]+ qpn=0x0*${qpn#0x} " "$snap") || die "softverbs-stat has no QP $qpn"
	sv_sport=$(echo "$line" | sed -E 's/.* sport=([0-9]+) .*/\1/')
	[ "$sv_sport" = "$sport" ] || die "QP $qpn: braid says sport $sport, softverbs uses $sv_sport"
done <<<"$qps"
echo "$qps" | awk '{ print $1 }' | while read -r qpn; do
	grep -E "^qp pid=[0-9]+ qpn=0x0*${qpn#0x} " "$snap" | sed -E 's/.* tx_bytes=([0-9]+) .*/\1/'
done >"$snap.tmp"
awk '{ b[NR] = $1; s += $1 } END {
	if (s == 0) { print "no bytes counted"; exit 1 }
	for (i = 1; i <= NR; i++) if (b[i] < 0.8 * s / NR || b[i] > 1.2 * s / NR) {
		printf "QP %d carried %d of %d bytes: not an even split\n", i, b[i], s; exit 1 }
	printf "split: %d bytes over %d QPs, each within 20%% of %d\n", s, NR, s / NR }' "$snap.tmp" ||
	die "large messages are not split evenly over the QPs"

run 0
qps=$(send_qps)
echo "BRAID_IB_FLOW_LABEL=0:"; echo "$qps"
echo "$qps" | awk '$3 != "0" { exit 1 }' || die "BRAID_IB_FLOW_LABEL=0 still set a label"
echo "flow labels: ok"
