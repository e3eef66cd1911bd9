#!/usr/bin/env bash
# Throughput through a NIC fault on fused net_ofi (issue 19, measured; the net_ib one is
# failover-timeline.sh): two network namespaces joined by two veth pairs, each shaped by
# tc (tbf) to R Mbit/s (tests/conformance/lib.sh), each side fusing its two interfaces
# (tcp;ofi_rxm, BRAID_MERGE), `braid perf` streaming SIZE messages from side a (its
# --server) to side b, and a2, the sender's NIC on pair 2, down FAULT_MS after perf
# started, up again FLAP_MS later (0: down for good). The
# veths' byte counters are read in each namespace every STEP s; the table is each pair's
# MB/s per interval (what its two ends sent), then the phases against 2R and R.
# net_ofi moves the parts of groups not yet sent on the NIC (the receiver moves them, asked
# by the sender), but none already sent there (docs/design/ofi-failover.md): those wait
# for the NIC, and TCP retransmits them once it is back; a NIC down for good fails the
# comm at BRAID_OFI_DOWN_TIMEOUT_MS (DOWN_TIMEOUT_MS here).
# Reports numbers; asserts nothing about timing. Needs root.
# Usage: tests/bench/ofi-failover-timeline.sh   (repo root, after make; BUILD, R (400),
#        SIZE (4M), SECS (10), FAULT_MS (5000), FLAP_MS (1000), STEP (0.1),
#        DOWN_TIMEOUT_MS (5000))
set -u
export BUILD=${BUILD:-build}
R=${R:-400}
SIZE=${SIZE:-4M}
SECS=${SECS:-10}
FAULT_MS=${FAULT_MS:-5000}
FLAP_MS=${FLAP_MS:-1000}
STEP=${STEP:-0.1}
RATE_MBIT=$R
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/../conformance/lib.sh"
netns_prereqs
command -v python3 >/dev/null || die "python3 is needed"
netns_two_pairs ofi-timeline

so=$(cd "$(dirname "$PLUGIN_SO")" && pwd)/$(basename "$PLUGIN_SO")
braid=$(cd "$BUILD" && pwd)/braid
need "$braid"
common=(env BRAID_BACKEND=ofi BRAID_OFI_PROVIDER="tcp;ofi_rxm" NCCL_DEBUG=WARN
	BRAID_OFI_DOWN_TIMEOUT_MS="${DOWN_TIMEOUT_MS:-5000}")
bytes=$(numfmt --from=iec "$SIZE")
# messages for about SECS s at 2R
iters=$(awk -v r="$R" -v s="$SECS" -v b="$bytes" 'BEGIN { printf "%d", r * 1e6 / 8 * 2 * s / b }')
port=$((20000 + id % 20000))
popts=(--plugin "$so" --port "$port" --min "$SIZE" --max "$SIZE" --iters "$iters" --warmup 2
	--bw-only --timeout 120)

# one sampler per namespace: time and the tx bytes of its two veths
sampler() { # NS IFC1 IFC2 OUT
	# shellcheck disable=SC2016 # expanded by the inner sh
	ip netns exec "$1" sh -c 'while :; do
		echo "$(date +%s.%N) $(cat /sys/class/net/$1/statistics/tx_bytes) $(cat /sys/class/net/$2/statistics/tx_bytes)"
		sleep "$3"
	done' sh "$2" "$3" "$STEP" >"$4" 2>/dev/null &
	samplers+=($!)
}
samplers=()
sampler "$nsa" "$a1" "$a2" "$tmp/samples.a"
sampler "$nsb" "$b1" "$b2" "$tmp/samples.b"

start=$(date +%s.%N)
ip netns exec "$nsa" "${common[@]}" BRAID_SOCKET_IFNAME="=$a1" BRAID_MERGE="$a1+$a2" \
	timeout 200 "$braid" perf --server "${popts[@]}" >"$tmp/perf.server" 2>&1 &
server=$!
pids+=("$server")
sleep 0.3
ip netns exec "$nsb" "${common[@]}" BRAID_SOCKET_IFNAME="=$b1" BRAID_MERGE="$b1+$b2" \
	timeout 200 "$braid" perf --client 198.18.1.1 "${popts[@]}" >"$tmp/perf.client" 2>&1 &
client=$!
pids+=("$client")
sleep "$(awk -v m="$FAULT_MS" 'BEGIN { printf "%.3f", m / 1000 }')"
fault=$(date +%s.%N)
ip -n "$nsa" link set "$a2" down || die "$a2 down"
if [ "$FLAP_MS" -gt 0 ]; then
	sleep "$(awk -v m="$FLAP_MS" 'BEGIN { printf "%.3f", m / 1000 }')"
	ip -n "$nsa" link set "$a2" up || die "$a2 up"
fi
up=$(date +%s.%N)
wait "$client"; rc_c=$?
wait "$server"; rc_s=$?
sleep "$STEP"
end=$(date +%s.%N)
for p in "${samplers[@]}"; do kill "$p" 2>/dev/null; done
wait "${samplers[@]}" 2>/dev/null

echo "# ofi-failover-timeline: two veth pairs at R = $R Mbit/s ($(awk -v r="$R" 'BEGIN { printf "%.0f", r / 8 }') MB/s) each, fused, $SIZE messages a -> b, $iters of them;"
echo "# $a2 down at $(awk -v f="$fault" -v s="$start" 'BEGIN { printf "%.2f", f - s }') s$([ "$FLAP_MS" -gt 0 ] && echo ", up again $FLAP_MS ms later" || echo " for good")"
echo "braid perf: server exit $rc_s, client exit $rc_c; data check: $(grep -c '^# data check: every verified iteration was right' "$tmp/perf.server") clean"
grep -h 'WARN' "$tmp/perf.server" "$tmp/perf.client" | grep -v 'SLOW PATH' |
	sed -E 's/.*NCCL WARN NET\/braid : //; s/  @[^ ]+$//' | head -n 8
python3 - "$tmp/samples.a" "$tmp/samples.b" "$start" "$fault" "$up" "$end" "$R" "$FLAP_MS" <<'EOF'
import sys
fa, fb = sys.argv[1], sys.argv[2]
start, fault, up, end, r, flap = (float(x) for x in sys.argv[3:9])
r = r / 8  # MB/s of one pair
def read(f):
    rows = []
    for line in open(f):
        p = line.split()
        if len(p) == 3:
            rows.append((float(p[0]), int(p[1]), int(p[2])))
    return rows
a, b = read(fa), read(fb)
def count_at(rows, t, col):
    # the counter at time t, linear between the samples around it (they come about every
    # STEP s, each late by a process start: nearest-sample rates read 0 now and then)
    for x0, x1 in zip(rows, rows[1:]):
        if x0[0] <= t <= x1[0]:
            w = (t - x0[0]) / max(x1[0] - x0[0], 1e-9)
            return x0[col] + w * (x1[col] - x0[col])
    return rows[0][col] if t < rows[0][0] else rows[-1][col]
def rate_at(rows, t0, t1, col):
    return (count_at(rows, t1, col) - count_at(rows, t0, col)) / (t1 - t0) / 1e6
step = (b[-1][0] - b[0][0]) / max(len(b) - 1, 1)
t, rows = max(a[0][0], b[0][0], start), []
while t + step <= min(a[-1][0], b[-1][0], end):
    p1 = rate_at(a, t, t + step, 1) + rate_at(b, t, t + step, 1)
    p2 = rate_at(a, t, t + step, 2) + rate_at(b, t, t + step, 2)
    rows.append((t + step - start, p1, p2))
    t += step
print("| t (s) | pair 1 MB/s | pair 2 MB/s | both |")
print("|---|---|---|---|")
for tt, p1, p2 in rows:
    print("| %.2f | %.0f | %.0f | %.0f |" % (tt, p1, p2, p1 + p2))
f, u = fault - start, up - start
busy = [x for x in rows if x[1] + x[2] > 0.1 * r]
last = busy[-1][0] if busy else f
def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")
first = busy[0][0] if busy else 0  # perf's set-up (connect, warm-up) comes first
before = [x[1] + x[2] for x in rows if first + 0.3 < x[0] < f - 0.2]
print("before the fault: %.0f MB/s = %.2f x 2R" % (mean(before), mean(before) / (2 * r)))
if flap > 0:
    during = [x[1] + x[2] for x in rows if f + 0.1 < x[0] < u]
    print("while %s was down (%.2f s to %.2f s): %.0f MB/s = %.2f x R" %
          ("it", f, u, mean(during), mean(during) / r))
    after = [x[1] + x[2] for x in rows if u + 1.0 < x[0] < last - 0.2]
    if after:
        print("from 1 s after it came back: %.0f MB/s = %.2f x 2R" %
              (mean(after), mean(after) / (2 * r)))
    stall = [x for x in rows if f < x[0] < min(u + 2.0, last) and x[1] + x[2] < 0.1 * r]
    print("intervals under 0.1 R from the fault to 2 s after the return: %d, about %.2f s" %
          (len(stall), len(stall) * step))
    back = [x for x in rows if x[0] > u and x[1] + x[2] > r]
    if back:
        print("from the NIC's return to over 1 R again: %.2f s" % (back[0][0] - u))
else:
    after = [x[1] + x[2] for x in rows if f + 0.1 < x[0]]
    print("after the fault: %.0f MB/s mean until the end of the samples" % mean(after))
EOF
