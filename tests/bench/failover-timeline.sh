#!/usr/bin/env bash
# Throughput through a failover (issue 19, measured): a fused device of two softverbs RoCE
# NICs, each at R MB/s (SOFTVERBS_DEVICE_RATE_MBPS; softverbs' unit: 10^6 bytes/s),
# `braid perf` streaming 4 MiB messages one way, and NIC 2's port down for good FAULT_MS
# after each process opened its devices (SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS; softverbs'
# default time scale: a retry budget of about 0.34 s). `braid stat --json --watch` samples
# the sender's comm counters every STEP s; the table is the bytes sent per interval as
# MB/s, then before the fault (against 2 R), after the failover WARN (against R) and the
# time from the fault to the failover WARN. With UP_MS, the port comes back UP_MS after the
# devices opened (SOFTVERBS_FAULT_PORT_UP_AFTER_MS) and the NIC rejoins the comm (recovery,
# BRAID_RECOVERY): the table then has the outage against R and after recovery against 2 R.
# Reports numbers; asserts nothing about timing.
# Usage: tests/bench/failover-timeline.sh   (repo root, after make; BUILD, R (200),
#        FAULT_MS (2000), UP_MS (none: down for good), SECS (6), STEP (0.1), FAILOVER (1))
set -u
BUILD=${BUILD:-build}
R=${R:-200}
FAULT_MS=${FAULT_MS:-2000}
SECS=${SECS:-6}
STEP=${STEP:-0.1}
. "$(dirname "$0")/../ib/lib.sh"
need "$BRAID"
command -v python3 >/dev/null || die "python3 is needed"
log=${LOG:-$SV_FABRIC.log} samples=${LOG:-$SV_FABRIC}.samples
export SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA==svroce0,svroce1
export BRAID_MERGE=svroce0+svroce1 BRAID_SOCKET_IFNAME=lo
export SOFTVERBS_DEVICE_RATE_MBPS="*:$R" BRAID_FAILOVER=${FAILOVER:-1}
export SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=svroce1:$FAULT_MS NCCL_DEBUG=WARN
UP_MS=${UP_MS:-}
[ -z "$UP_MS" ] || export SOFTVERBS_FAULT_PORT_UP_AFTER_MS=svroce1:$UP_MS
# messages for about SECS s at 2 R, at most (the tail runs at R)
iters=$(awk -v r="$R" -v s="$SECS" 'BEGIN { printf "%d", r * 1e6 * s / 4194304 }')
start=$(date +%s.%N)
timeout 120 "$BRAID" perf --backend ib --bw-only --min 4M --max 4M --iters "$iters" --warmup 4 \
	>"$log" 2>&1 &
perf=$!
# per report: the seconds since the start and the bytes per second perf's processes (perf
# and its peer) sent over the interval (the watch's per-device rates)
"$BRAID" stat --json --watch "$STEP" 2>/dev/null |
	python3 -c '
import json, sys, time
t0, root = float(sys.argv[1]), int(sys.argv[2])
def ours(pid):
    while pid > 1:
        if pid == root:
            return True
        try:
            pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    bps = sum(v.get("tx_Bps", 0) for p in d.get("processes", []) if ours(p.get("pid", 0))
              for v in p.get("devices", []))
    print("%.3f %.0f" % (time.time() - t0, bps), flush=True)' "$start" "$perf" >"$samples" &
watch=$!
wait $perf
rc=$?
kill $watch 2>/dev/null
wait $watch 2>/dev/null
echo "braid perf: exit $rc; $(grep -c 'ib: failover:' "$log") failover WARN(s)," \
	"$(grep -c 'ib: recovery:' "$log") recovery WARN(s)"
grep -E 'WARN' "$log" | head -n 8
python3 - "$samples" "$R" "$FAULT_MS" "$log" "${UP_MS:-0}" <<'EOF'
import sys
samples, r, fault_ms, log = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
up_ms = float(sys.argv[5])
rates = []
for line in open(samples):
    t, bps = line.split()
    rates.append((float(t), float(bps) / 1e6))
print("| t (s) | MB/s |")
print("|---|---|")
for t, v in rates:
    print("| %.2f | %.0f |" % (t, v))
busy = [x for x in rates if x[1] > 0]
if not busy:
    sys.exit("no traffic sampled")
first = busy[0][0]
# the fault comes FAULT_MS after each process opened its devices, a little before the
# first busy report: the outage's first report says when
outage = [t for t, v in rates if first + 0.3 < t < busy[-1][0] and v < 0.1 * r]
fault = outage[0] if outage else first + fault_ms / 1000.0
before = [v for t, v in busy if first + 0.5 < t < fault - 0.2]
up = fault + (up_ms - fault_ms) / 1000.0 if up_ms else busy[-1][0]
after = [v for t, v in busy if fault + 1.0 < t < min(up, busy[-1][0]) - 0.2]
back = [v for t, v in busy if up_ms and up + 1.0 < t < busy[-1][0] - 0.2]
if before:
    print("before the fault: %.0f MB/s = %.2f x 2R" % (sum(before) / len(before),
                                                      sum(before) / len(before) / (2 * r)))
if after:
    print("from 1 s after the fault%s: %.0f MB/s = %.2f x R" %
          (" to the port's return" if up_ms else "", sum(after) / len(after),
           sum(after) / len(after) / r))
if back:
    print("from 1 s after the port came back (%.2f s): %.0f MB/s = %.2f x 2R" %
          (up, sum(back) / len(back), sum(back) / len(back) / (2 * r)))
# the outage: reports under 0.1 R between the first and the last busy one (the retry
# budget running out on the dead NIC's QPs, then the failover)
step = (rates[-1][0] - rates[0][0]) / max(len(rates) - 1, 1)
print("reports under 0.1 R mid-stream: %d, about %.2f s without traffic%s" %
      (len(outage), len(outage) * step, " (from %.2f s)" % outage[0] if outage else ""))
EOF
