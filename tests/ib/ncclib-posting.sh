#!/usr/bin/env bash
# NCCL_IB_FIFO_TC, NCCL_IB_USE_INLINE and NCCL_IB_SPLIT_DATA_ON_QPS mean under braid what
# they mean in NCCL's IB transport (docs/ib.md), seen from softverbs' per-QP counts of a
# braid perf run over a RoCE device (SOFTVERBS_STATS_KEEP=1, softverbs-stat -a after it):
#   - NCCL_IB_FIFO_TC: the receive side's QPs (the control writes and the data's ACKs) carry
#     that traffic class, the send side's the data's (NCCL_IB_TC); unset, all carry the data's;
#   - NCCL_IB_USE_INLINE: every control write goes inline, no data write does; unset, none;
#   - NCCL_IB_SPLIT_DATA_ON_QPS=1: every message is cut over the 4 QPs, also one below
#     BRAID_IB_SPLIT_BYTES; =0: none is, each message goes whole to one QP, the QPs in turn;
#     BRAID_IB_SPLIT_BYTES, when set, wins;
#   - the accepting (receive) side's QPs take the connecting side's traffic class, as NCCL's
#     receiver takes the sender's (remMeta->tc): both ends of a QP pair carry one class.
# Every byte perf moves is checked by perf itself (first and last iteration of each size).
set -u
. "$(dirname "$0")/lib.sh"
need "$BRAID" "$STAT"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
export BRAID_IB_QPS_PER_CONN=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL NCCL_IB_TC=106
log=$SV_FABRIC.log snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$log" "$snap"')
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
N=16 # messages of the timed size: ITERS + WARMUP

run() { # SIZE, then VAR=VALUE... for braid perf
	local size=$1
	shift
	rm -rf "${SV_FABRIC:?}"/*
	env SOFTVERBS_STATS_KEEP=1 "$@" timeout 60 "$BRAID" perf --backend ib --bw-only \
		--min "$size" --max "$size" --iters $((N - 2)) --warmup 2 >"$log" 2>&1 ||
		{ tail -n 20 "$log"; die "braid perf failed ($*)"; }
	"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
}

# Every QP that posted a write, as "tc tx_msgs inline_msgs tx_bytes".
writers() {
	grep '^qp ' "$snap" | sed -E 's/.* tx_bytes=([0-9]+) .* tx_msgs=([0-9]+) .* tc=([0-9]+) .* inline_msgs=([0-9]+).*/\3 \2 \4 \1/' |
		awk '$2 > 0'
}

# "bytes writes" of each QP of the send comm that carried the data.
data_qps() {
	ib_send_qps "$log" "$snap" | awk '{ print $1 }' | while read -r qpn; do
		ib_qp_row "$snap" "$qpn" | sed -E 's/.* tx_bytes=([0-9]+) .* tx_msgs=([0-9]+) .*/\1 \2/'
	done
}

echo "== NCCL_IB_FIFO_TC=98 NCCL_IB_USE_INLINE=1 (data: NCCL_IB_TC=106)"
run 1M NCCL_IB_FIFO_TC=98 NCCL_IB_USE_INLINE=1
writers | sed 's/^/  tc tx_msgs inline_msgs tx_bytes: /'
writers | awk '$1 == 98 && $3 == $2 && $4 == 64 * $2 { fifo += $2; next }
	$1 == 106 && $3 == 0 { if ($4 >= 1048576) data++; next }
	{ printf "  a QP with tc %d sent %d writes (%d inline, %d bytes)\n", $1, $2, $3, $4; odd++ }
	END { printf "  %d control writes at tc 98, all inline; %d data QPs at tc 106\n", fifo, data
	      exit odd || fifo < 16 || data < 1 }' ||
	bad "control writes must go inline at NCCL_IB_FIFO_TC, data at NCCL_IB_TC and not inline"

echo "== neither set: every QP at NCCL_IB_TC=106, nothing inline"
run 1M
writers | awk '$1 != 106 || $3 != 0 { printf "  tc %d, %d of %d writes inline\n", $1, $3, $2; odd++ }
	END { exit odd }' || bad "without NCCL_IB_FIFO_TC and NCCL_IB_USE_INLINE"

echo "== NCCL_IB_SPLIT_DATA_ON_QPS=1, 32 KiB messages (below BRAID_IB_SPLIT_BYTES): 8 KiB per QP"
# BRAID_STRIPE=equal: NCCL's even cut (braid's default weighs the QPs by goodput)
run 32K NCCL_IB_SPLIT_DATA_ON_QPS=1 BRAID_STRIPE=equal
data_qps | awk -v n=$N '{ printf "  QP: %d bytes in %d writes\n", $1, $2 }
	$1 != n * 8192 || $2 != n { odd++ } END { exit odd || NR != 4 }' ||
	bad "each message must be cut in 4 chunks of 8 KiB"

echo "== NCCL_IB_SPLIT_DATA_ON_QPS=0, 4 MiB messages: each whole on one QP, the QPs in turn"
run 4M NCCL_IB_SPLIT_DATA_ON_QPS=0
data_qps | awk -v n=$N '{ printf "  QP: %d bytes in %d writes\n", $1, $2 }
	$1 != n / 4 * 4194304 || $2 != n / 4 { odd++ } END { exit odd || NR != 4 }' ||
	bad "each message must go whole to one QP, 4 per QP"

echo "== BRAID_IB_SPLIT_BYTES=0 wins over NCCL_IB_SPLIT_DATA_ON_QPS=0"
run 32K NCCL_IB_SPLIT_DATA_ON_QPS=0 BRAID_IB_SPLIT_BYTES=0
data_qps | awk -v n=$N '$1 != n * 8192 || $2 != n { odd++ } END { exit odd || NR != 4 }' ||
	bad "BRAID_IB_SPLIT_BYTES=0 must split every message"

echo "== the receive side takes the sender's class: NCCL_IB_TC=106 on rank b, 0 on a"
# conformance's tiny scenario: b connects and sends, a accepts and receives, in two
# processes with different NCCL_IB_TC: every QP end must carry b's 106.
rm -rf "${SV_FABRIC:?}"/* && mkdir -p "$SV_FABRIC/run"
for role in a b; do
	tc=$([ $role = b ] && echo 106 || echo 0)
	SOFTVERBS_STATS_KEEP=1 NCCL_IB_TC=$tc timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 \
		--scenario tiny --role $role --dir "$SV_FABRIC/run" >"$log.$role" 2>&1 &
done
wait %1 && wait %2 || { tail -n 5 "$log".?; die "the tiny scenario failed"; }
"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
grep '^qp ' "$snap" | sed -E 's/.* qpn=(0x[0-9a-f]+) dest_qpn=(0x[0-9a-f]+) .* tc=([0-9]+) .*/\1 \2 \3/' |
	awk '{ tc[$1] = $3; dest[$1] = $2 } END {
		for (q in dest) if (dest[q] in tc) { pairs[tc[q]]++; if (tc[q] != tc[dest[q]]) {
			printf "  QP %s has tc %d, its peer %s tc %d\n", q, tc[q], dest[q], tc[dest[q]]; odd++ } }
		printf "  QP ends at tc 106: %d, at tc 0: %d\n", pairs[106], pairs[0]
		exit odd || !pairs[106] || pairs[0] }' ||
	bad "both ends of every QP pair must carry the connecting side's class"
rm -f "$log".?

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: NCCL_IB_FIFO_TC, NCCL_IB_USE_INLINE and NCCL_IB_SPLIT_DATA_ON_QPS as in NCCL"
