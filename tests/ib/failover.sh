#!/usr/bin/env bash
# NIC failover under a live comm, on a fused device (svroce0+svroce1): when one NIC of the
# device fails, its chunks in flight and all later traffic move to the comm's other NIC,
# every message completes once with every byte right, and the comm fails only when every
# NIC has failed (BRAID_FAILOVER=on, the default). Each process that fails over prints one
# WARN per failed NIC per comm side:
#   ib: failover: send comm to PEER: NIC svroce1:1 failed (QP 0x.. -> remote QP 0x..: STATUS)
#   after N bytes over it; its traffic moves to the comm's 1 other NIC(s) (peer GID ..)
# (and "receive comm from PEER" on the receiver's side).
#   svroce1 down for good mid-soak            passes, a failover WARN naming svroce1:1
#   svroce0 down for good mid-soak            passes; the receiver's FIFO writes go on
#                                             rail 0, so both sides fail over
#   both down                                 the soak fails, bounded, never hangs
#   BRAID_FAILOVER=off, svroce1 down          the soak fails as before, no failover WARN
#   a QP cut after a chunk landed, ACK lost    passes: the chunk is neither lost nor counted
#                                             twice
#   one QP's link cut on svroce1 (braid perf)  perf passes, a failover WARN
# The soak (conformance's soak scenario) checks every byte of every message it receives
# against the sender's pattern, and the 64 bytes past each message (xfer.c): its exit
# status 0 means both sides received every message, each byte right. braid perf checks
# the first and last timed iteration of each size only.
# softverbs' port fault is per process: each process's own port goes down, 1.5 s after it
# first opened a device, and only what that process sends stalls (and fails once the retry
# budget, 0.34 s at the default SOFTVERBS_TIME_SCALE, is spent). Both processes get it.
set -u
. "$(dirname "$0")/lib.sh"
need "$BRAID"
export SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA='=svroce0,svroce1' \
	BRAID_MERGE=svroce0+svroce1 BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=WARN
# 6,000 messages (about 5 GiB both ways) take the soak about 4 s with both NICs: it is
# well under way when a port goes at 1.5 s.
export CONF_SOAK_TRANSFERS=6000
BOUND_S=20
log=$SV_FABRIC.log
# shellcheck disable=SC2016 # expanded at exit, by ib_cleanup
IB_CLEANUP+=('rm -f "$log"')
fail=0
# A WARN that fails a comm: net_ib's data path ("ib: send comm svroce1:1 QP 0x.. -> remote
# QP ..."), or the link layer's for a request that can never complete ("ib: receive comm
# svroce0:1: peer ... closed its comm ...").
COMM_FAILED='NCCL WARN NET/braid : ib: (send|receive) comm svroce[0-9]+:[0-9]+[: ]'
FAILOVER='WARN.*ib: failover: (send|receive) comm '

secs=0 rc=0 case_ok=1
run() { # name command...: runs it into $log; sets rc, secs
	local name=$1 start
	shift
	start=$(date +%s.%N)
	"$@" >"$log" 2>&1
	rc=$?
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
	echo "== case: $name: exit $rc after $secs s"
	grep -E 'WARN|returned|soak (done|FAILED)|data check' "$log" | grep -v 'striping gives it less'
	case_ok=1
}
soak() { # name env-assignment...
	local name=$1
	shift
	run "$name" env "$@" timeout 60 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario soak
}
bad() { echo "FAIL: $*"; case_ok=0; }
done_case() { [ $case_ok -eq 1 ] || { tail -n 20 "$log"; fail=1; }; }

within_bound() {
	awk -v s="$secs" -v b="$BOUND_S" 'BEGIN { exit !(s < b) }' || bad "took $secs s (bound $BOUND_S s)"
}
# At most one failover WARN per process, comm side, peer (one comm each) and NIC.
once_each() {
	local dup re='^[^:]*:([0-9]+):.*ib: failover: (send|receive) comm (to|from) ([^ ]+): NIC ([^ ]+) failed.*'

	dup=$(grep -E "$FAILOVER" "$log" | sed -E "s/$re/\\1 \\2 \\4 \\5/" | sort | uniq -d)
	[ -z "$dup" ] || bad "more than one failover WARN for one comm side and NIC" \
		"(pid side peer NIC): $dup"
}
# The soak passed, every byte checked on both sides, and it was still running when the
# port went (1.5 s after the device opened, which is before the soak starts its clock).
soak_passed() {
	[ "$rc" -eq 0 ] || bad "the soak failed (rc $rc)"
	[ "$(grep -c 'soak done: received and verified' "$log")" -eq 2 ] ||
		bad "not both sides say 'soak done: received and verified'"
	grep -E 'soak done: received and verified' "$log" | sed -E 's/.* in ([0-9.]+) s;.*/\1/' |
		awk '$1 < 2.0 { bad = 1 } END { exit bad }' ||
		bad "the soak ended before the port went down: raise CONF_SOAK_TRANSFERS"
}
soak_failed() {
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then bad "the soak did not fail with an error (rc $rc)"; fi
	grep -Eq 'returned ncclRemoteError|returned ncclSystemError' "$log" ||
		bad "no ncclRemoteError/ncclSystemError return"
}
no_comm_failed() {
	! grep -Eq "$COMM_FAILED" "$log" || bad "a WARN failed a comm"
}
failover_warn() { # side-regex NIC
	local qps='\(QP 0x[0-9a-f]+ -> remote QP 0x[0-9a-f]+: .*\)'

	grep -Eq "WARN.*ib: failover: $1 comm .*NIC $2 failed $qps after [0-9]+ bytes over it; its traffic moves to the comm's 1 other NIC\(s\)" "$log" ||
		bad "no failover WARN ($1 comm) naming $2"
}
only_nic() { # NIC: no failover WARN names another
	! grep -E "$FAILOVER" "$log" | grep -vq "NIC $1 failed" || bad "a failover WARN names another NIC than $1"
}

soak "svroce1 down for good 1.5 s into a soak" SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=svroce1:1500
soak_passed
within_bound
failover_warn '(send|receive)' svroce1:1
only_nic svroce1:1
no_comm_failed
once_each
done_case

soak "svroce0 down for good 1.5 s into a soak (the receivers' FIFO rail)" \
	SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=svroce0:1500
soak_passed
within_bound
failover_warn send svroce0:1
failover_warn receive svroce0:1
only_nic svroce0:1
no_comm_failed
once_each
done_case

soak "svroce0 and svroce1 down for good 1.5 s into a soak" \
	SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=svroce0:1500,svroce1:1500
soak_failed
within_bound
once_each
done_case

soak "BRAID_FAILOVER=off, svroce1 down for good 1.5 s into a soak" BRAID_FAILOVER=off \
	SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=svroce1:1500
soak_failed
within_bound
! grep -Eq "$FAILOVER" "$log" || bad "a failover WARN with BRAID_FAILOVER=off"
grep -Eq 'WARN.*ib: send comm svroce1:1 QP 0x[0-9a-f]+ -> remote QP .*transport retry counter exceeded' "$log" ||
	bad "no WARN failing a send comm on svroce1:1"
done_case

# QP i of a comm is on NIC i % 2: the process's 2nd QP is on svroce1 (faults.sh's last
# case, where the comm fails with BRAID_FAILOVER=off). The port stays up, and softverbs
# mends a cut link when the QP is reset, so recovery (tests/ib/recovery.sh) would bring
# the NIC back and the cut would come again after as many bytes: BRAID_RECOVERY=0 in the
# cut cases, which test failover alone.
run "braid perf, the link of a QP on svroce1 cut" env SOFTVERBS_FAULT_CUT_AFTER_BYTES=8000000 \
	SOFTVERBS_FAULT_CUT_QP=2 BRAID_RECOVERY=0 timeout 60 "$BRAID" perf --backend ib --bw-only --min 1M \
	--max 1M --iters 3000 --timeout 20
[ "$rc" -eq 0 ] || bad "perf failed (rc $rc)"
within_bound
grep -q 'data check: every verified iteration was right' "$log" || bad "perf's data check did not pass"
failover_warn '(send|receive)' svroce1:1
only_nic svroce1:1
no_comm_failed
once_each
done_case

# A chunk that landed although its sender saw it fail: the write that crosses the cut
# arrives whole and the link goes before its ACK (SOFTVERBS_FAULT_CUT_DELIVER). The sender's
# probe finds it landed and writes again only what did not; a chunk that came twice would
# count once. Every byte of the soak is checked, so a buffer completed early, twice or
# with a chunk missing fails it.
soak "the 2nd QP of each process cut after a chunk landed whose ACK was lost" \
	SOFTVERBS_FAULT_CUT_AFTER_BYTES=8000000 SOFTVERBS_FAULT_CUT_QP=2 SOFTVERBS_FAULT_CUT_DELIVER=1 \
	BRAID_RECOVERY=0
soak_passed
within_bound
# each process's 2nd QP: on svroce1 in one, on svroce0 in the other (their comms open in
# another order), and the QP's peer, a receiver's FIFO QP, fails over too
failover_warn '(send|receive)' 'svroce[01]:1'
no_comm_failed
once_each
done_case

[ "$fail" -eq 0 ] || die "NIC failover"
echo "failover: all passed"
