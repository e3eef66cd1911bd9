#!/usr/bin/env bash
# ECMP entropy of one connection over softverbs' uplink model (a measurement, not a test;
# docs/benchmarks.md has the results). For U uplinks, Q QPs per connection and flow labels
# on (braid) or off (0, as NCCL): `braid perf` streams 4 MiB messages (split over the Q
# QPs) through one connection; softverbs-stat -a, once it is over, gives the bytes per
# uplink (SOFTVERBS_STATS_KEEP=1 keeps the counts of processes that ended: a sample taken
# while perf ran could hold a few chunks on a loaded machine, issue 21). Per run: the
# busiest uplink's share of the bytes and the number of uplinks used.
# Averaged over TRIALS connections (QP numbers, hence hashes, differ each run).
#   usage: BUILD=build tests/ib/entropy.sh [TRIALS]
set -u
. "$(dirname "$0")/lib.sh"
trials=${1:-8}
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -f "$snap"')

one_run() { # U Q FL -> "maxshare used"
	rm -rf "${SV_FABRIC:?}"/*
	SOFTVERBS_STATS_KEEP=1 SOFTVERBS_UPLINKS=$1 BRAID_IB_QPS_PER_CONN=$2 BRAID_IB_FLOW_LABEL=$3 \
		"$BRAID" perf --backend ib --bw-only --min 4M --max 4M --iters 96 --warmup 2 \
		>/dev/null 2>&1 || { echo "FAIL: braid perf failed (U=$1 Q=$2 FL=$3)" >&2; exit 1; }
	"$STAT" -a >"$snap" || { echo "FAIL: softverbs-stat -a failed" >&2; exit 1; }
	awk -F'[ =]' -v n="$1" '/^uplink/ { b[$3] = $5; s += $5 }
		END { m = 0; u = 0
		      for (i = 0; i < n; i++) { if (b[i] > m) m = b[i]; if (s && b[i] > s / 100) u++ }
		      printf "%.3f %d\n", s ? m / s : 1, u }' "$snap"
}

printf '| uplinks | QPs | flow labels | busiest uplink share (mean) | worst | uplinks used (mean) | usable fraction of U uplinks |\n'
printf '|---|---|---|---|---|---|---|\n'
for U in 4 8; do
	for Q in 1 2 4 8; do
		for FL in 1 0; do
			# one_run runs in this subshell: its exit 1 ends the loop, then the script
			res=$(for t in $(seq 1 "$trials"); do one_run "$U" "$Q" "$FL" || exit 1; done) ||
				exit 1
			echo "$res" | awk -v U="$U" -v Q="$Q" -v FL="$FL" '
				{ s += $1; u += $2; if ($1 > w) w = $1; n++ }
				END { m = s / n
				      printf "| %d | %d | %s | %.3f | %.3f | %.2f | %.2f |\n", U, Q,
				             FL ? "braid (distinct, non-zero)" : "0 (kernel: from QPNs)",
				             m, w, u / n, (1 / U) / m }'
		done
	done
done
