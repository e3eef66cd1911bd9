#!/usr/bin/env bash
# braid stat --watch N --count K: K reports, each with rates over its interval per process,
# device and QP; a counter that moves at a known rate shows it, one that does not shows 0;
# a process that ends between two reports is counted as ended, one that starts is shown
# with rates since its start; with --json one document per report and line.
set -u
. "$(dirname "$0")/lib.sh"
D=$BRAID_SHM_DIR
out=$T/out

# dev 0 (and QP 0) send 50 MB/s, in steps of 20 ms; dev 1 and QPs 1..3 stand still
hold --dir "$D" --backend ib --provider 'svroce0,svroce1' --ib --rate 50000000
ib=$HELD
hold --dir "$D" --backend ofi --provider 'tcp;ofi_rxm' --slow --rate 20000000
slow=$HELD

"$BRAID" stat --watch 0.5 --count 2 >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] && pass "exit status 0" || fail "exit status $rc"
cat "$out"
n=$(grep -c '^report ' "$out")
[ "$n" -eq 2 ] && pass "two reports" || fail "$n reports, not 2"
expect "$out" "^report 1  .*  interval 0\.50 s: 2 running \(1 on a slow path\), 0 ended since the last report$" "report 1 header"
expect "$out" "^report 2  " "report 2 header"
expect_before "$out" "^pid $slow  SLOW PATH  ofi tcp;ofi_rxm$" "^pid $ib  ib svroce0,svroce1$" \
	"slow process first in a report, marked"
# rates: 50 MB/s and 20 MB/s within a generous band (a loaded machine delays the writer)
for r in 1 2; do
	awk -v r="$r" '/^report /{n=$2} n==r' "$out" >"$T/r$r"
	expect "$T/r$r" "^  0   svroce0:1 +(3[0-9]|4[0-9]|5[0-9]|6[0-5])\.[0-9] +0\.0 " "report $r: dev 0 of ib at about 50 MB/s tx, 0 rx"
	expect "$T/r$r" "^  1   svroce1:1 +0\.0 +0\.0 +0\.0 +0\.0 +0 +0 +0 +0$" "report $r: dev 1 idle"
	expect "$T/r$r" "^  0   mkdev0 +(1[0-9]|2[0-6])\.[0-9] +0\.0 " "report $r: dev 0 of the slow process at about 20 MB/s"
	expect "$T/r$r" "^  0 +0 +0x100 +(3[0-9]|4[0-9]|5[0-9]|6[0-5])\.[0-9] +0\.0 +0$" "report $r: QP 0 at about 50 MB/s"
	expect "$T/r$r" "^  \(3 idle QP\(s\) not shown\)$" "report $r: idle QPs counted, not shown"
done
expect_not "$out" "new: rates since it started" "no process new in either report"

# one process ends and one starts between the reports: once report 1 is out (not after a
# fixed sleep: on a loaded machine braid stat can take its first snapshot later than the
# change), with 2 s left before report 2 for the new process to start
"$BRAID" stat --watch 2 --count 2 >"$out" 2>&1 &
watcher=$!
for _ in $(seq 200); do # 10 s
	grep -q '^report 1 ' "$out" && break
	kill -0 "$watcher" 2>/dev/null || break
	sleep 0.05
done
grep -q '^report 1 ' "$out" || fail "braid stat --watch 2: no report 1 after 10 s"
kill "$slow"
wait "$slow" 2>/dev/null
hold --dir "$D" --backend ofi --provider shm
new=$HELD
wait "$watcher"
rc=$?
[ $rc -eq 0 ] && pass "exit status 0" || fail "exit status $rc"
cat "$out"
awk '/^report /{n=$2} n==2' "$out" >"$T/r2"
expect "$T/r2" "^report 2 .*: 2 running \(0 on a slow path\), 1 ended since the last report$" "report 2: the killed process counted as ended"
expect_not "$T/r2" "^pid $slow " "report 2: the killed process not listed"
expect "$T/r2" "^pid $new  ofi shm  \(new: rates since it started\)$" "report 2: the new process, rates since its start"
expect "$T/r2" "^\(1 ended, 0 file\(s\) not read: braid stat without --watch names them\)$" "report 2: ended files counted"

command -v python3 >/dev/null || { finish; }
"$BRAID" stat --json --watch 0.5 --count 2 >"$out" 2>&1
python3 - "$out" "$ib" >"$T/py" 2>&1 <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
ib = int(sys.argv[2])
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
check(len(lines) == 2, "--json --watch: 2 lines, got %d" % len(lines))
for k, line in enumerate(lines, 1):
    doc = json.loads(line)
    check(doc.get("report") == k and doc.get("interval_s") == 0.5 and doc.get("braid_stat") == 1,
          "line %d: report %d, interval 0.5" % (k, k))
    p = [x for x in doc.get("processes", []) if x.get("pid") == ib]
    check(len(p) == 1, "line %d: the ib process" % k)
    if not p:
        continue
    p = p[0]
    check(p.get("since") == "interval" and 0.3 < p.get("seconds", 0) < 1.5, "line %d: an interval of about 0.5 s" % k)
    d = p.get("devices", [])
    check(len(d) == 2 and 3e7 < (d[0].get("tx_Bps") or 0) < 6.5e7 and d[1].get("tx_Bps") == 0.0,
          "line %d: device rates %s" % (k, [x.get("tx_Bps") for x in d]))
    q = p.get("qps", [])
    check(len(q) == 1 and q[0].get("qpn") == 0x100 and 3e7 < (q[0].get("tx_Bps") or 0) < 6.5e7
          and p.get("idle_qps") == 3, "line %d: QP 0 rate, 3 idle" % k)
PY
prc=$?
cat "$out" "$T/py"
[ $prc -eq 0 ] || fail "the python checks exited with $prc"
nfail=$((nfail + $(grep -c '^FAIL' "$T/py")))
finish
