#!/usr/bin/env bash
# braid perf next to raw libfabric (fi_rdm_bench), same provider, same sizes, same
# method: 4 MiB streaming bandwidth with 16 requests in flight, 8-byte ping-pong latency.
# Median of RUNS runs each (default 3), alternated so that both see the same machine.
# Usage: tests/bench/compare.sh   (from the repo root; BUILD, PROVIDER, IFACE, RUNS, PLUGIN)
set -u
BUILD=${BUILD:-build}
PROVIDER=${PROVIDER:-tcp;ofi_rxm}
IFACE=${IFACE:-lo}
RUNS=${RUNS:-3}
SIZE=$((4 << 20))
ITERS=${ITERS:-256}
LAT_ITERS=${LAT_ITERS:-2000}
PLUGIN=${PLUGIN:-$BUILD/libnccl-net-braid.so}
braid=$BUILD/braid
raw=$BUILD/tests/bench/fi_rdm_bench
for f in "$braid" "$raw" "$PLUGIN"; do
	[ -e "$f" ] || { echo "compare: $f is missing: run make first"; exit 1; }
done
export FI_TCP_IFACE=$IFACE BRAID_SOCKET_IFNAME=$IFACE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }

for i in $(seq "$RUNS"); do
	timeout 120 "$braid" perf --backend ofi --provider "$PROVIDER" --plugin "$PLUGIN" \
		--min $SIZE --max $SIZE --iters "$ITERS" --warmup 16 --window 16 --lat-size 8 \
		--lat-iters "$LAT_ITERS" >"$tmp/braid.$i" 2>"$tmp/braid.$i.err" ||
		{ echo "compare: braid perf failed:"; tail -5 "$tmp/braid.$i.err"; exit 1; }
	timeout 120 "$raw" --provider "$PROVIDER" --size $SIZE --iters "$ITERS" --warmup 16 \
		--window 16 --lat-size 8 --lat-iters "$LAT_ITERS" >"$tmp/raw.$i" 2>"$tmp/raw.$i.err" ||
		{ echo "compare: fi_rdm_bench failed:"; tail -5 "$tmp/raw.$i.err"; exit 1; }
done

# bandwidth: the row of the size, GB/s column; latency: the "avg .. p50 .." line
bw() { for f in "$tmp"/$1.[0-9]*; do case $f in *.err) continue ;; esac
	awk -v s=$SIZE '$1 == s { print $4 }' "$f"; done | median; }
lat() { for f in "$tmp"/$1.[0-9]*; do case $f in *.err) continue ;; esac
	awk -v k="$2" '/^#   avg/ { for (i = 1; i <= NF; i++) if ($i == k) print $(i + 1) }' "$f"
	done | median; }

b_bw=$(bw braid) r_bw=$(bw raw)
b_p50=$(lat braid p50) r_p50=$(lat raw p50)
b_avg=$(lat braid avg) r_avg=$(lat raw avg)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "n/a" }'; }

echo "provider $PROVIDER on $IFACE; 4 MiB streaming, window 16, $ITERS iterations;"
echo "8-byte ping-pong, $LAT_ITERS iterations; median of $RUNS runs each; $(nproc) CPUs"
printf '%-30s %12s %14s %10s\n' "" "braid perf" "raw libfabric" "braid/raw"
printf '%-30s %12s %14s %10s\n' "bandwidth 4 MiB (GB/s)" "$b_bw" "$r_bw" "$(ratio "$b_bw" "$r_bw")"
printf '%-30s %12s %14s %10s\n' "latency 8 B, p50 (us)" "$b_p50" "$r_p50" "$(ratio "$b_p50" "$r_p50")"
printf '%-30s %12s %14s %10s\n' "latency 8 B, avg (us)" "$b_avg" "$r_avg" "$(ratio "$b_avg" "$r_avg")"
awk -v bb="$b_bw" -v rb="$r_bw" -v bl="$b_p50" -v rl="$r_p50" 'BEGIN {
	printf "target (bandwidth >= 90%% of raw, latency <= 110%% of raw): bandwidth %s, latency %s\n",
		(rb > 0 && bb >= 0.9 * rb) ? "met" : "MISSED", (rl > 0 && bl <= 1.1 * rl) ? "met" : "MISSED" }'
grep -h 'WRONG' "$tmp"/braid.* && { echo "compare: braid perf moved wrong data"; exit 1; }
exit 0
