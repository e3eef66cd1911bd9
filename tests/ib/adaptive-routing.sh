#!/usr/bin/env bash
# NCCL_IB_ADAPTIVE_ROUTING and NCCL_IB_AR_THRESHOLD mean under braid what they mean in
# NCCL's IB transport (init.cc, p2p.cc ncclIbMultiSend):
#   - on by default on InfiniBand ports, off on RoCE; the variable, when set, decides;
#   - with it on, a message larger than the threshold (8192 by default) goes as plain RDMA
#     WRITEs, each QP's followed by one WRITE_WITH_IMM; a smaller one as WRITE_WITH_IMM only.
# Seen from softverbs' per-QP counts of the send comm's data QPs after a braid perf run:
# tx_msgs (writes) against imm_msgs (writes with an immediate). braid's WRITE_WITH_IMM of an
# adaptive-routing chunk carries the chunk's 4-byte size (NCCL's carries 0 bytes and the
# size in the immediate), so those QPs' tx_bytes are the data plus 4 per chunk.
# perf checks every byte it moves (first and last iteration of each size), and the
# receiver's size comes from those records: a wrong one fails the run.
set -u
. "$(dirname "$0")/lib.sh"
need "$BRAID" "$STAT"
export BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL
unset NCCL_IB_ADAPTIVE_ROUTING NCCL_IB_AR_THRESHOLD BRAID_IB_ADAPTIVE_ROUTING BRAID_IB_AR_THRESHOLD
log=$SV_FABRIC.log snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$log" "$snap"')
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
N=16 # messages of the timed size: ITERS + WARMUP

run() { # DEVICE(ib|roce) SIZE, then VAR=VALUE... for braid perf
	local dev=sv${1}0 kind=$1 size=$2
	shift 2
	rm -rf "${SV_FABRIC:?}"/*
	env SOFTVERBS_DEVICES=$dev:$kind:1 BRAID_IB_HCA==$dev SOFTVERBS_STATS_KEEP=1 "$@" \
		timeout 60 "$BRAID" perf --backend ib --bw-only --min "$size" --max "$size" \
		--iters $((N - 2)) --warmup 2 >"$log" 2>&1 ||
		{ tail -n 20 "$log"; die "braid perf failed ($*)"; }
	"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
}

# "tx_bytes tx_msgs imm_msgs" of each QP of the send comm that carried the data.
data_qps() {
	ib_send_qps "$log" "$snap" | awk '{ print $1 }' | while read -r qpn; do
		ib_qp_row "$snap" "$qpn" |
			sed -E 's/.* tx_bytes=([0-9]+) .* tx_msgs=([0-9]+) .* imm_msgs=([0-9]+).*/\1 \2 \3/'
	done
}

# check WHAT AR(0|1) SIZE QPS: the QPS data QPs carried N messages of SIZE, each chunk one
# WRITE_WITH_IMM, after a plain WRITE when AR is 1. With one QP that is N chunks; with
# several, a message is cut over them while some QP is idle and goes whole to one once
# every QP has one in flight (ib_post.c), so N to N x QPS chunks.
check() {
	local what=$1 ar=$2 size=$3 nqps=$4
	data_qps | awk -v n=$N -v ar="$ar" -v size="$size" -v nqps="$nqps" '
		{ printf "  QP: %d bytes, %d writes, %d with an immediate\n", $1, $2, $3
		  imm += $3; bytes += $1; if ($2 != $3 * (ar ? 2 : 1)) odd++ }
		END { want = n * nqps; data = bytes - (ar ? 4 * imm : 0)
		      if (imm < n || imm > want) printf "  %d chunks, want %d to %d\n", imm, n, want
		      if (data != n * size) printf "  %d data bytes, want %d\n", data, n * size
		      exit odd || imm < n || imm > want || data != n * size || NR != nqps }' ||
		bad "$what"
}

echo "== InfiniBand, defaults, 1 MiB: adaptive routing (NCCL's default on IB)"
run ib 1M
grep -q 'ib: device 0 = svib0:1.*adaptive routing on' "$log" || bad "init must say 'adaptive routing on'"
check "1 MiB on InfiniBand must go as WRITE + WRITE_WITH_IMM" 1 1048576 1

echo "== InfiniBand, defaults, 8 KiB (not above NCCL's threshold of 8192): WRITE_WITH_IMM only"
run ib 8K
check "8 KiB must go as WRITE_WITH_IMM alone" 0 8192 1

echo "== InfiniBand, NCCL_IB_AR_THRESHOLD=4096, 8 KiB: adaptive routing"
run ib 8K NCCL_IB_AR_THRESHOLD=4096
check "8 KiB above NCCL_IB_AR_THRESHOLD=4096 must go the adaptive-routing way" 1 8192 1

echo "== InfiniBand, NCCL_IB_AR_THRESHOLD=-1, 8 B: every message (NCCL's meaning of -1)"
run ib 8 NCCL_IB_AR_THRESHOLD=-1
check "8 B with NCCL_IB_AR_THRESHOLD=-1 must go the adaptive-routing way" 1 8 1

echo "== InfiniBand, NCCL_IB_ADAPTIVE_ROUTING=0, 1 MiB: off"
run ib 1M NCCL_IB_ADAPTIVE_ROUTING=0
grep -q 'ib: device 0 = svib0:1.*adaptive routing off' "$log" || bad "init must say 'adaptive routing off'"
check "NCCL_IB_ADAPTIVE_ROUTING=0 must post WRITE_WITH_IMM only" 0 1048576 1

echo "== RoCE, 4 QPs, defaults, 1 MiB: off (NCCL's default on RoCE)"
run roce 1M BRAID_IB_QPS_PER_CONN=4
check "RoCE must post WRITE_WITH_IMM only by default" 0 1048576 4

echo "== RoCE, 4 QPs, NCCL_IB_ADAPTIVE_ROUTING=1, 1 MiB: on, on every chunk"
run roce 1M BRAID_IB_QPS_PER_CONN=4 NCCL_IB_ADAPTIVE_ROUTING=1
check "NCCL_IB_ADAPTIVE_ROUTING=1 on RoCE must post WRITE + WRITE_WITH_IMM for every chunk" 1 1048576 4

echo "== two InfiniBand ports fused, 4 MiB: every NIC's QP posts that way, with its own keys"
rm -rf "${SV_FABRIC:?}"/*
SOFTVERBS_DEVICES=svib0:ib:1,svib1:ib:1 BRAID_IB_HCA==svib0,svib1 BRAID_MERGE=svib0+svib1 \
	BRAID_STRIPE=equal SOFTVERBS_STATS_KEEP=1 timeout 60 "$BRAID" perf --backend ib --bw-only \
	--min 4M --max 4M --iters $((N - 2)) --warmup 2 >"$log" 2>&1 ||
	{ tail -n 20 "$log"; die "braid perf failed (fused)"; }
"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
check "a fused device of InfiniBand ports must post WRITE + WRITE_WITH_IMM on each NIC" 1 4194304 2

echo "== the receiver has it off, the sender on: the sender posts without it, and says so"
# conformance's stream scenario (every byte checked): b connects and sends, a accepts and
# receives, in two processes with different NCCL_IB_ADAPTIVE_ROUTING.
rm -rf "${SV_FABRIC:?}"/* && mkdir -p "$SV_FABRIC/run"
for role in a b; do
	ar=$([ $role = b ] && echo 1 || echo 0)
	SOFTVERBS_DEVICES=svib0:ib:1 BRAID_IB_HCA==svib0 SOFTVERBS_STATS_KEEP=1 \
		NCCL_IB_ADAPTIVE_ROUTING=$ar NCCL_IB_AR_THRESHOLD=-1 timeout 120 "$CONF_BIN" \
		--plugin "$PLUGIN_SO" --api 11 --scenario tiny --role $role --dir "$SV_FABRIC/run" \
		>"$log.$role" 2>&1 &
done
wait %1 && wait %2 || { tail -n 5 "$log".?; die "the tiny scenario failed"; }
grep -q 'posts without adaptive routing' "$log.b" || bad "no INFO that the sender posts without it"
"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
grep '^qp ' "$snap" | sed -E 's/.* tx_msgs=([0-9]+) .* imm_msgs=([0-9]+).*/\1 \2/' |
	awk '$2 > 0 && $1 != $2 { odd++ } $2 > 0 { imm += $2 }
		END { printf "  %d writes with an immediate, %d QP(s) with plain writes too\n", imm, odd
		      exit odd || !imm }' ||
	bad "without the receiver's records, no data write may go the adaptive-routing way"
rm -f "$log".?

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: NCCL_IB_ADAPTIVE_ROUTING and NCCL_IB_AR_THRESHOLD as in NCCL"
