#!/usr/bin/env bash
# Multi-rail on softverbs NICs shaped to a line rate (SOFTVERBS_DEVICE_RATE_MBPS): one NIC
# alone, two, four and (ncclNet v12) eight fused, a fast and a slow NIC (adaptive and equal striping), and the
# 8-byte latency of a fused device against one NIC. Every figure is a ratio taken within
# this run. R is low enough that the shaped NICs, not the CPU, are the bottleneck: the
# last row shows what the same fused pair carries with no limit.
# Usage: tests/bench/multirail.sh   (from the repo root; BUILD, R in MB/s, SIZES, RUNS)
set -u
BUILD=${BUILD:-build}
R=${R:-400}
RUNS=${RUNS:-3}
MIN=${MIN:-4M} MAX=${MAX:-16M}
braid=$BUILD/braid
so=$(cd "$BUILD" && pwd)/libnccl-net-braid.so
sv=$(cd "$BUILD/softverbs" && pwd)
[ -x "$braid" ] && [ -f "$so" ] && [ -f "$sv/libibverbs.so.1" ] ||
	{ echo "multirail: build first (make)"; exit 1; }
fab=$(mktemp -d /tmp/svbench.XXXXXX)
trap 'rm -rf "$fab"' EXIT
export LD_LIBRARY_PATH=$sv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} SOFTVERBS_FABRIC=$fab
nics=(svroce0 svroce1 svroce2 svroce3 svroce4 svroce5 svroce6 svroce7)
devs=$(printf '%s:roce:1,' "${nics[@]}") hcas=$(printf '%s,' "${nics[@]}")
eight=$(printf '%s+' "${nics[@]}")
export SOFTVERBS_DEVICES=${devs%,}
export BRAID_BACKEND=ib BRAID_SOCKET_IFNAME=lo BRAID_IB_HCA="=${hcas%,}"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }

# run NAME ENV... : median GB/s at MAX (bandwidth) of RUNS runs; the last run's lanes kept.
# API (default 11): the ncclNet version perf drives.
run_bw() {
	local name=$1; shift
	for i in $(seq "$RUNS"); do
		env "$@" timeout 300 "$braid" perf --plugin "$so" --api "${API:-11}" --bw-only --min "$MIN" \
			--max "$MAX" --iters 48 --warmup 8 --window 16 >"$fab/$name.$i" 2>&1 ||
			{ echo "multirail: $name failed:"; tail -5 "$fab/$name.$i"; exit 1; }
		grep -q '^# data check: every verified iteration was right' "$fab/$name.$i" ||
			{ echo "multirail: $name: data check failed"; exit 1; }
	done
	for i in $(seq "$RUNS"); do
		awk -v s="$(numfmt --from=iec "$MAX")" '$1 == s { print $4 }' "$fab/$name.$i"
	done | median
}

run_lat() {
	local name=$1; shift
	for i in $(seq "$RUNS"); do
		env "$@" timeout 300 "$braid" perf --plugin "$so" --lat-only --lat-iters 2000 \
			>"$fab/$name.$i" 2>&1 || { echo "multirail: $name failed"; exit 1; }
		awk '/^#   avg/ { for (i = 1; i <= NF; i++) if ($i == "p50") print $(i + 1) }' \
			"$fab/$name.$i"
	done | median
}

lanes() { sed -n '/^# send comm to/,/^# data check/p' "$fab/$1.$RUNS" | grep -v 'data check'; }

rates="SOFTVERBS_DEVICE_RATE_MBPS=*:$R"
slow="SOFTVERBS_DEVICE_RATE_MBPS=*:$R,svroce1:$((R / 4))"
one=$(run_bw one "$rates" BRAID_MERGE=none)
two=$(run_bw two "$rates" BRAID_MERGE=svroce0+svroce1)
four=$(run_bw four "$rates" BRAID_MERGE=svroce0+svroce1+svroce2+svroce3)
eight=$(API=12 run_bw eight "$rates" BRAID_MERGE="${eight%+}")
adapt=$(run_bw adaptive "$slow" BRAID_MERGE=svroce0+svroce1 BRAID_STRIPE=adaptive)
equal=$(run_bw equal "$slow" BRAID_MERGE=svroce0+svroce1 BRAID_STRIPE=equal)
free=$(run_bw unlimited BRAID_MERGE=svroce0+svroce1)
lat1=$(run_lat lat-one BRAID_MERGE=none)
lat2=$(run_lat lat-two BRAID_MERGE=svroce0+svroce1)

ratio() { awk -v a="$1" -v r="$2" 'BEGIN { printf "%.2f", a * 1000 / r }'; }
echo "# multirail: softverbs RoCE NICs, R = $R MB/s per NIC, $MAX messages, 16 in flight,"
echo "# median of $RUNS runs ($(nproc) cores); GB/s and x R"
printf '%-36s %8s %8s\n' "setup" "GB/s" "x R"
printf '%-36s %8s %8s\n' "one NIC at R" "$one" "$(ratio "$one" "$R")"
printf '%-36s %8s %8s\n' "2 NICs at R, fused" "$two" "$(ratio "$two" "$R")"
printf '%-36s %8s %8s\n' "4 NICs at R, fused" "$four" "$(ratio "$four" "$R")"
printf '%-36s %8s %8s\n' "8 NICs at R, fused (v12)" "$eight" "$(ratio "$eight" "$R")"
printf '%-36s %8s %8s\n' "R + R/4, adaptive" "$adapt" "$(ratio "$adapt" "$R")"
printf '%-36s %8s %8s\n' "R + R/4, equal" "$equal" "$(ratio "$equal" "$R")"
printf '%-36s %8s %8s\n' "2 NICs, no limit (CPU headroom)" "$free" "$(ratio "$free" "$R")"
echo "# 8-byte latency, p50 half round trip (no rate limit): one NIC $lat1 us, fused pair" \
	"$lat2 us ($(awk -v a="$lat2" -v b="$lat1" 'BEGIN { printf "%.0f", 100 * a / b }')%)"
echo "# lanes of the last adaptive run (R + R/4):"
lanes adaptive
echo "# lanes of the last equal run:"
lanes equal
