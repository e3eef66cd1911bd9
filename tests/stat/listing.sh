#!/usr/bin/env bash
# braid stat's listing from counters files written as the plugin writes them
# (tests/stat/mkregion): running processes with their backend and provider, slow path
# first and marked, a fused comm's NICs and the QP records; files of ended processes
# not listed as running (a dead pid, a pid that another process has now); files of
# another layout version named with both versions and never read; truncated, empty,
# garbage and linked files named and skipped; other files left alone; --pid.
set -u
. "$(dirname "$0")/lib.sh"
D=$BRAID_SHM_DIR
out=$T/out

# fast first: by pid alone it would come first, slow-path-first must put it second
t0=$(date +%s.%N)
hold --dir "$D" --backend ofi --provider 'verbs;ofi_rxm' --gdr --regs 0,6
fast=$HELD
hold --dir "$D" --backend ofi --provider 'tcp;ofi_rxm' --slow --regs 0,4
slow=$HELD
hold --dir "$D" --backend ib --provider 'svroce0,svroce1' --ib --regs 4,2
ib=$HELD
dead=$(dead_pid)
"$MK" --file "$D/braid-$dead" --provider 'shm'
"$MK" --file "$D/braid-$$" --provider 'shm' # pid of this shell: running, but not braid
# The counters layout version this braid reads (plugin/counters.h), one newer and one older.
V=$(sed -n 's/^#define BRAID_CTR_VERSION \([0-9]*\).*/\1/p' plugin/counters.h)
NEWER=$((V + 1)) OLDER=$((V - 1))
"$MK" --file "$D/braid-999001" --version $NEWER --backend MISREAD --provider MISREAD
"$MK" --file "$D/braid-999002" --version $OLDER --backend MISREAD --provider MISREAD
"$MK" --file "$D/braid-999003" --size 1000 --provider MISREAD
"$MK" --file "$D/braid-999004" --size 8
: >"$D/braid-999005"
"$MK" --file "$D/braid-999006" --garbage
"$MK" --file "$D/braid-999007" --dev-rec-size 100 --provider MISREAD
"$MK" --file "$T/elsewhere" --pid 999008 --provider MISREAD
ln -s "$T/elsewhere" "$D/braid-999008"
"$MK" --file "$D/braid-abc" --provider MISREAD
"$MK" --file "$D/notbraid-5" --provider MISREAD

"$BRAID" stat >"$out" 2>&1
rc=$?
t1=$(date +%s.%N)
[ $rc -eq 0 ] && pass "exit status 0" || fail "exit status $rc"
cat "$out"

expect "$out" "^braid stat: $D: 3 running braid process\(es\) \(1 on a slow path\), 2 ended, 8 file\(s\) not read" \
	"summary line: 3 running, 1 slow, 2 ended, 8 not read"
expect "$out" "^pid $slow  SLOW PATH  live, up" "slow process marked SLOW PATH and live"
first=$(grep -m1 '^pid ' "$out")
case $first in "pid $slow  SLOW PATH"*) pass "the slow process comes first" ;;
*) fail "the first process is not the slow one: '$first'" ;; esac
expect_before "$out" "^pid $slow " "^pid $fast " "slow process ($slow) before fast ($fast)"
expect "$out" "^pid $fast  live, up 1[0-9]s" "fast process live, not marked, up 10s and a little"
expect "$out" "^pid $ib  live, up" "ib process live"
expect "$out" "^  backend ofi, provider verbs;ofi_rxm$" "fast process: backend and provider"
expect "$out" "^  backend ofi, provider tcp;ofi_rxm: SLOW PATH$" "slow process: backend, provider, marked"
expect "$out" "^  why: mkregion: ofi provider tcp;ofi_rxm; first choice$" "why"
expect "$out" "^  GPUDirect RDMA on \(mode dma-buf\): mkregion: dma-buf on every device$" "GPUDirect on and why"
expect "$out" "^  GPUDirect RDMA off \(mode none\): mkregion: no GPU$" "GPUDirect off and why"
# offered is not used: what NCCL registered says
expect "$out" "^  GPUDirect used: NO, although offered \(NCCL's receive buffers: 0 in GPU memory, 6 in host memory; NCCL copies every message through host memory: see NCCL_NET_GDR_LEVEL\)$" \
	"GPUDirect offered, not used: NCCL registered host memory only"
expect "$out" "^  GPUDirect used: no \(NCCL's receive buffers: 0 in GPU memory, 4 in host memory\)$" \
	"GPUDirect not offered, not used"
expect "$out" "^  GPUDirect used: yes \(NCCL's receive buffers: 4 in GPU memory, 2 in host memory\)$" \
	"GPUDirect used: buffers in GPU memory"
expect "$out" "^  liveness: live: holds its counters file's lock$" "liveness by the lock, this PID namespace"
# dev 0: 1e9 tx (and 100 MB/s more), 2e9 rx bytes, started 10 s before mkregion ran:
# about 100 and 200 MB/s on average. 2e9 bytes over an uptime of 10 s plus however long
# the holders took to start and stat to run (seconds under a loaded SAN build): each
# average between 2000 / (10 + that + 1) and 200 MB/s (avg_in below).
num='[0-9]+\.[0-9]'
expect "$out" "^    0   mkdev0 +1[0-9]{9} +2000000000 +[0-9]+ +2000 +0 +5 +7 +0 +$num +$num  up$" \
	"device line: bytes, msgs, errors, stalls, strangers, slow_lanes, averages, port up"
expect "$out" "^    1   svroce1:1 +2000000000 +2000000000 +1000 +2000 +1 +6 +7 +3 +$num +$num  DOWN$" \
	"ib device 1: errors 1, stalls 6, slow_lanes 3, port DOWN"
# avg_in NAME FIELD LOW HIGH: the average in FIELD (from the end) of NAME's device line
avg_in() {
	local v
	v=$(awk -v n="$1" -v f="$2" '$2 == n { print $(NF - f); exit }' "$out")
	if [ -n "$v" ] && awk -v v="$v" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
		pass "$1: average $v MB/s in [$3, $4]"
	else
		fail "$1: average '$v' MB/s not in [$3, $4] (${elapsed}s from the first holder to stat)"
	fi
}
elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
low200=$(awk -v e="$elapsed" 'BEGIN { printf "%.1f", 2000 / (10 + e + 1) - 0.1 }')
avg_in mkdev0 2 90 109.9     # tx: 100 MB/s since the start, kept up by the holder
avg_in mkdev0 1 "$low200" 200 # rx
avg_in svroce1:1 2 "$low200" 200
avg_in svroce1:1 1 "$low200" 200
expect "$out" "^  comms: 2 \(1 send, 1 recv\)$" "comm counts"
expect "$out" "^    0 +send 0 +192\.0\.2\.7:40001 +600000000 +0 +600 +0 +2$" "fused send comm, 2 NICs"
expect "$out" "^    2 +recv 0 +192\.0\.2\.8:40002 +0 +500000000 +500 +0 +1$" "recv comm"
expect "$out" "^ +NIC +bytes +share +weight +rate_MB/s +slow +state +failovers +recoveries$" \
	"NIC header: failovers, then recoveries"
expect "$out" "^ +svroce0:1 +480000000 +80\.0% +80\.0% +12000\.0  no    up +2 +2$" \
	"NIC 0: bytes, share, weight, rate; failed twice, came back twice: up"
expect "$out" "^ +svroce1:1 +120000000 +20\.0% +20\.0% +3000\.0  SLOW  DOWN +1 +0$" \
	"NIC 1: marked slow; failed, not back (and its port down): DOWN"
expect "$out" "^  link: RoCE, GID index 3 \(RoCEv2\), MTU 4096$" "link layer, GID, MTU"
expect "$out" "^  qps: 4$" "4 QP records"
expect "$out" "^    0 +0 +svroce0:1 +0x100 +0x200 +0x1000 +49152 +0 +[1-9][0-9]{8,9} +0 +0 " \
	"QP 0: qpn, remote, flow label, sport (its bytes: 1.5e8, and 100 MB/s more)"
expect "$out" "^    3 +1 +svroce1:1 +0x103 +0x203 +0x1003 +49155 +0 +150000000 " "QP 3"
expect "$out" "^  qps: none \(the ofi backend keeps no per-QP records\)$" "ofi: no QP records"

expect "$out" "^  $D/braid-$dead: pid $dead, backend ofi, provider shm, started .*: no process holds its lock: ended without removing its file$" \
	"dead pid: listed as ended"
expect_not "$out" "^pid $dead " "dead pid: not listed as running"
expect "$out" "^  $D/braid-$$: pid $$, .*ended without removing its file \(its pid here is another process now\)$" \
	"pid of another (running) process, no lock: ended"
expect_not "$out" "^pid $$ " "pid of another process: not listed as running"
expect_before "$out" "^ended" "^not read:" "ended before not read"

expect "$out" "^  $D/braid-999001: counters layout version $NEWER, this braid stat reads version $V \(a newer braid wrote it\): not read \(no process holds it\)$" \
	"version $NEWER: named with both versions"
expect "$out" "^  $D/braid-999002: counters layout version $OLDER, this braid stat reads version $V \(an older braid wrote it\): not read" \
	"version $OLDER: named with both versions"
expect_not "$out" "MISREAD" "nothing read from files of another version, layout, truncated, linked or not braid's"
expect "$out" "^  $D/braid-999003: truncated: 1000 of [0-9]+ bytes" "truncated file named"
expect "$out" "^  $D/braid-999004: truncated: 8 bytes, too short for a header" "short file named"
expect "$out" "^  $D/braid-999005: empty" "empty file named"
expect "$out" "^  $D/braid-999006: not a braid counters file \(magic 0x" "garbage named"
expect "$out" "^  $D/braid-999007: version $V but another layout \(header [0-9]+, device 100, " "another layout of version $V named"
expect "$out" "^  $D/braid-999008: a symbolic link, not a counters file$" "symbolic link named, not followed"
for n in 999003 999004 999005 999006 999007 999008; do
	expect_not "$out" "^pid $n " "braid-$n not listed as a process"
done
expect_not "$out" "braid-abc|notbraid" "other files left alone"

"$BRAID" stat --pid "$fast" >"$out" 2>&1
expect "$out" "^braid stat: $D: 1 running braid process\(es\) \(0 on a slow path\), 0 ended, 0 file\(s\) not read" "--pid: one process"
expect "$out" "^pid $fast  live" "--pid: that process"
expect_not "$out" "^pid $slow|braid-9990" "--pid: no other"

rm -rf "${D:?}"/*
"$BRAID" stat >"$out" 2>&1
expect "$out" "^braid stat: $D: 0 running braid process\(es\)" "an empty directory"
"$BRAID" stat --dir "$T/none" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] && pass "a missing directory: exit 1" || fail "a missing directory: exit $rc"
expect "$out" "^braid stat: $T/none: No such file or directory$" "a missing directory: said"
"$BRAID" stat --count 2 >"$out" 2>&1
rc=$?
[ $rc -eq 2 ] && pass "--count without --watch: usage error" || fail "--count alone: exit $rc"
finish
