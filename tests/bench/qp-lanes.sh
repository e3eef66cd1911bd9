#!/usr/bin/env bash
# QPs as lanes (issue 18 item 3) on softverbs' uplink model: one RoCE NIC, 4 QPs per
# connection, SOFTVERBS_UPLINKS=4 uplinks at R MB/s each (softverbs' unit: 10^6 bytes/s)
# but uplink SLOW at R / 4. Each QP's
# UDP source port picks its uplink (ECMP), so a QP hashed onto the slow uplink is a slow
# path. `braid perf` streams 4 MiB messages through one connection with BRAID_STRIPE=equal
# (every QP a quarter: the message ends with the slowest QP) and adaptive (each QP's share
# by its measured goodput). Per run: GB/s, and the capacity of the uplinks the send comm's
# data QPs actually used (two QPs on one uplink share it; softverbs-stat -a, after the run,
# gives each QP's uplink), and their ratio. QP numbers, hence uplinks, differ each run: a
# run whose QPs missed the slow uplink shows no slow path and is not counted, up to
# TRIES runs per mode. Reports numbers; asserts nothing about timing.
# Usage: tests/bench/qp-lanes.sh   (repo root, after make; BUILD, R (250, MB/s), SLOW (3),
#        RUNS (3 counted runs per mode), TRIES (12), ITERS (192), WARMUP (64))
# The WARMUP messages, untimed, hold the start: until the QPs are measured each takes a
# quarter of the first 16 messages (perf's window), and a slow QP takes long to drain
# that backlog (16 MiB at 62 MB/s: a quarter second). Steady state is what is timed.
set -u
BUILD=${BUILD:-build}
R=${R:-250}
SLOW=${SLOW:-3}
RUNS=${RUNS:-3}
TRIES=${TRIES:-12}
ITERS=${ITERS:-192}
WARMUP=${WARMUP:-64}
. "$(dirname "$0")/../ib/lib.sh"
need "$BRAID" "$STAT"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
export SOFTVERBS_UPLINKS=4 BRAID_IB_QPS_PER_CONN=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL
export SOFTVERBS_UPLINK_RATE_MBPS="*:$R,$SLOW:$((R / 4))"
log=$SV_FABRIC.log snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$log" "$snap"')

# one MODE: "GB/s capacity_GB/s uplinks_used slow_used QPs'_uplinks", or nothing when the
# run failed
one() {
	local gbs qps ups
	rm -rf "${SV_FABRIC:?}"/*
	SOFTVERBS_STATS_KEEP=1 BRAID_STRIPE=$1 timeout 300 "$BRAID" perf --backend ib --bw-only \
		--min 4M --max 4M --iters "$ITERS" --warmup "$WARMUP" >"$log" 2>&1 || return 0
	"$STAT" -a >"$snap" || return 0
	gbs=$(awk '$1 == 4194304 { print $4 }' "$log")
	qps=$(ib_send_qps "$log" "$snap" | awk '{ print $1 }')
	ups=$(for q in $qps; do ib_qp_row "$snap" "$q" | sed -E 's/.* uplink=([0-9]+) .*/\1/'; done)
	echo "$ups" | sort -u | awk -v list="$(echo "$ups" | paste -sd,)" -v g="$gbs" -v r="$R" \
		-v s="$SLOW" -v sr=$((R / 4)) '
			{ cap += ($1 == s ? sr : r) / 1000; n++; slow += $1 == s }
			END { printf "%s %.3f %d %d %s\n", g, cap, n, slow, list }'
}

printf 'uplinks 4 x %d MB/s, uplink %d at %d MB/s; 4 QPs; 4 MiB messages, %d timed after %d\n' \
	"$R" "$SLOW" $((R / 4)) "$ITERS" "$WARMUP"
printf '| mode | run | GB/s | QPs%s uplinks | capacity of those (GB/s) | GB/s / capacity |\n' "'"
printf '|---|---|---|---|---|---|\n'
for mode in equal adaptive; do
	got=0 tries=0
	while [ "$got" -lt "$RUNS" ] && [ "$tries" -lt "$TRIES" ]; do
		tries=$((tries + 1))
		read -r gbs cap _ slow ups <<<"$(one "$mode")"
		[ -n "${gbs:-}" ] || { echo "| $mode | - | FAIL (braid perf) | | | |"; continue; }
		[ "$slow" -eq 1 ] || continue
		got=$((got + 1))
		printf '| %s | %d | %s | %s | %s | %.2f |\n' "$mode" "$got" "$gbs" "$ups" "$cap" \
			"$(echo "$gbs $cap" | awk '{ print $1 / $2 }')"
	done
done
