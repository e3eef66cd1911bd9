#!/usr/bin/env bash
# net_ofi multi-rail: two veth pairs between two network namespaces, each shaped by tc
# (tbf) to R Mbit/s; braid perf over tcp;ofi_rxm on one pair alone, then on the two fused;
# then the second pair at R/4, with the sender's adaptive weights and with the equal cut
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
# run LANES OUT [R2 MODE]
run() {
	for i in $(seq "$RUNS"); do
		BRAID_STRIPE=${4:-adaptive} LANES=$1 RATE_MBIT=$R RATE_MBIT2=${3:-$R} \
			PERF_MIN=$SIZE PERF_MAX=$SIZE PERF_ITERS=${ITERS:-96} \
			bash tests/conformance/netns-fused.sh >"$2.$i" 2>&1 ||
			{ echo "multirail-ofi: LANES=$1 failed:"; tail -5 "$2.$i"; exit 1; }
		awk -v s="$bytes" '$1 == s { print $4 }' "$2.$i"
	done | median
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one=$(run 1 "$tmp/one")
two=$(run 2 "$tmp/two")
q=$((R / 4))
ad=$(run 2 "$tmp/ad" "$q" adaptive)
eq=$(run 2 "$tmp/eq" "$q" equal)
rb=$(awk -v r="$R" 'BEGIN { printf "%.3f", r / 8 / 1000 }') # GB/s of one pair
xr() { awk -v a="$1" -v r="$rb" 'BEGIN { printf "%.2f", a / r }'; }
echo "# multirail-ofi: tcp;ofi_rxm over veth pairs shaped to R = $R Mbit/s ($rb GB/s),"
echo "# $SIZE messages, ${ITERS:-96} per run, median of $RUNS runs"
printf '%-36s %8s %8s\n' "setup" "GB/s" "x R"
printf '%-36s %8s %8s\n' "one pair" "$one" "$(xr "$one")"
printf '%-36s %8s %8s\n' "two pairs, fused" "$two" "$(xr "$two")"
printf '%-36s %8s %8s\n' "R + R/4 fused, adaptive (ideal 1.25)" "$ad" "$(xr "$ad")"
printf '%-36s %8s %8s\n' "R + R/4 fused, equal (ideal 0.50)" "$eq" "$(xr "$eq")"
for f in two ad; do
	sed -n '/^# send comm to/,/^# latency/p' "$tmp/$f.$RUNS" | grep -v '^# latency'
done
