#!/usr/bin/env bash
# net_ofi multi-rail: two veth pairs between two network namespaces, each shaped by tc
# (tbf) to R Mbit/s; braid perf over tcp;ofi_rxm on one pair alone, then on the two fused
# (tests/conformance/netns-fused.sh does the set-up). Median of RUNS runs at SIZE.
# Usage: tests/bench/multirail-ofi.sh   (root; BUILD, R in Mbit/s, SIZE, RUNS)
set -u
BUILD=${BUILD:-build}
R=${R:-800}
RUNS=${RUNS:-3}
SIZE=${SIZE:-4M}
export BUILD
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }
bytes=$(numfmt --from=iec "$SIZE")
run() {
	for i in $(seq "$RUNS"); do
		LANES=$1 RATE_MBIT=$R PERF_MIN=$SIZE PERF_MAX=$SIZE PERF_ITERS=48 \
			bash tests/conformance/netns-fused.sh >"$2.$i" 2>&1 ||
			{ echo "multirail-ofi: LANES=$1 failed:"; tail -5 "$2.$i"; exit 1; }
		awk -v s="$bytes" '$1 == s { print $4 }' "$2.$i"
	done | median
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one=$(run 1 "$tmp/one")
two=$(run 2 "$tmp/two")
rb=$(awk -v r="$R" 'BEGIN { printf "%.3f", r / 8 / 1000 }') # GB/s of one pair
echo "# multirail-ofi: tcp;ofi_rxm over veth pairs shaped to R = $R Mbit/s ($rb GB/s) each,"
echo "# $SIZE messages, median of $RUNS runs"
printf '%-28s %8s %8s\n' "setup" "GB/s" "x R"
printf '%-28s %8s %8s\n' "one pair" "$one" "$(awk -v a="$one" -v r="$rb" 'BEGIN { printf "%.2f", a / r }')"
printf '%-28s %8s %8s\n' "two pairs, fused" "$two" "$(awk -v a="$two" -v r="$rb" 'BEGIN { printf "%.2f", a / r }')"
sed -n '/^# send comm to/,/^# latency/p' "$tmp/two.$RUNS" | grep -v '^# latency'
