#!/usr/bin/env bash
# make soak, issue 19: conformance's soak on a fused device (svroce0+svroce1, softverbs)
# while one of its NICs, picked at random each run, flaps at random: up U ms (0.7 to
# 2.0 s), then down D ms (0.1 to 1.5 s: some shorter than the QP retry budget, about 0.34
# s at softverbs' default time scale, which RC retries ride out; the others a failover,
# then a recovery once the port is back), F times (2 to 5). Every byte of every message is
# checked both ways by the soak: nothing lost, nothing duplicated, nothing out of place.
# Each run must pass with no comm failed; the failovers and recoveries each run saw are
# counted and printed. Faults are per process (softverbs), both processes get the same
# schedule from their own start. The seed is printed; FAULT_SEED=N replays the schedules.
# Usage: tests/ib/fault-soak.sh   (after make; BUILD, RUNS (4), TRANSFERS (15000 a run:
#        about 7 s at the 2,200 messages/s of a quiet machine, longer than most schedules;
#        a schedule that outlasts its soak is reported, and its run still counts))
set -u
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA='=svroce0,svroce1' \
	BRAID_MERGE=svroce0+svroce1 BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=WARN CONF_SOAK_COMMS=4
RUNS=${RUNS:-4}
TRANSFERS=${TRANSFERS:-15000}
seed=${FAULT_SEED:-$(( (RANDOM << 15) | RANDOM ))}
RANDOM=$seed
log=$SV_FABRIC.log
# shellcheck disable=SC2016 # expanded at exit, by ib_cleanup
IB_CLEANUP+=('rm -f "$log"')
COMM_FAILED='NCCL WARN NET/braid : ib: (send|receive) comm svroce[0-9]+:[0-9]+[: ]'
echo "fault-soak: seed $seed (FAULT_SEED=$seed replays the schedules), $RUNS runs of" \
	"$TRANSFERS transfers"
fail=0 total=0
for run in $(seq "$RUNS"); do
	dev=svroce$((RANDOM % 2))
	up=$((700 + RANDOM % 1301)) down=$((100 + RANDOM % 1401)) flaps=$((2 + RANDOM % 4))
	period=$((up + down))
	echo "== run $run: $dev up ${up} ms then down ${down} ms, $flaps times" \
		"(to $((flaps * period)) ms after each process opened its devices)"
	t0=$SECONDS
	timeout -k 5 180 env CONF_SOAK_TRANSFERS="$TRANSFERS" \
		SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS="$dev:$up" \
		SOFTVERBS_FAULT_PORT_UP_AFTER_MS="$dev:$period" SOFTVERBS_FAULT_PORT_FLAPS="$flaps" \
		"$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario soak >"$log" 2>&1
	rc=$?
	fo=$(grep -c "ib: failover: .*NIC $dev:1 failed" "$log")
	rec=$(grep -c "ib: recovery: .*NIC $dev:1 is back" "$log")
	secs=$(grep -E 'soak done: received and verified' "$log" |
		sed -E 's/.* in ([0-9.]+) s;.*/\1/' | sort -g | tail -n 1)
	echo "  exit $rc after $((SECONDS - t0)) s; soak ${secs:-?} s; failover WARNs $fo," \
		"recovery WARNs $rec"
	ok=1
	[ "$rc" -eq 0 ] || { echo "FAIL: the soak failed (exit $rc)"; ok=0; }
	[ "$(grep -c 'soak done: received and verified' "$log")" -eq 2 ] ||
		{ echo "FAIL: not both sides say 'soak done: received and verified'"; ok=0; }
	! grep -Eq "$COMM_FAILED" "$log" || { echo "FAIL: a WARN failed a comm"; ok=0; }
	! grep -E 'ib: failover: ' "$log" | grep -vq "NIC $dev:1 failed" ||
		{ echo "FAIL: a failover WARN names another NIC than $dev:1"; ok=0; }
	[ -n "$secs" ] && awk -v s="$secs" -v e=$((flaps * period)) 'BEGIN { exit !(s * 1000 < e) }' &&
		echo "  (the soak ended before the schedule did: not every flap fell inside it)"
	if [ $ok = 0 ]; then
		grep -E 'WARN|FAIL|soak (done|FAILED)' "$log" | grep -v 'striping gives it less' |
			cut -c1-240 | tail -n 20
		fail=1
	else
		total=$((total + TRANSFERS))
	fi
done
[ $fail -eq 0 ] || die "fault-soak failed (FAULT_SEED=$seed replays its schedules)"
echo "fault-soak: all passed: $total transfers verified through random faults (seed $seed)"
