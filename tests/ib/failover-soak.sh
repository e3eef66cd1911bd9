#!/usr/bin/env bash
# make soak-failover: ROUNDS (default 20) soaks on a fused device (svroce0+svroce1), each
# with one random fault on a random NIC at a random time, every byte of every message
# checked (conformance's soak scenario): one NIC's port down for good after 0.3 to 2.5 s,
# or one QP's link cut after 1 to 65 MB, the write that crosses the cut truncated or
# landing whole with its ACK lost, or one NIC's port flapping 1 to 3 times (down after 0.3
# to 1.5 s for 0.5 to 1.5 s). With recovery on (the default) a NIC comes back once its
# port is up, and a cut QP's link is whole again after the reset, so a cut comes again
# after as many bytes: rounds of failover and recovery. Never both NICs of a comm:
# failover must carry every round, with no WARN that fails a comm. A round that fails prints its fault and soak
# seed to replay it (the same fault variables and CONF_SOAK_SEED).
# Long: not in make test (tests/ib/failover.sh has one round of each kind).
set -u
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-20}
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA==svroce0,svroce1
export BRAID_MERGE=svroce0+svroce1 BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=WARN
export CONF_SOAK_TRANSFERS=${CONF_SOAK_TRANSFERS:-6000}
log=$SV_FABRIC.log
IB_CLEANUP+=('rm -f "$log"')
seed=${SEED:-$RANDOM}
RANDOM=$seed
echo "failover soak: $ROUNDS rounds, fault seed $seed (SEED=$seed replays the faults)"
fail=0
for round in $(seq 1 "$ROUNDS"); do
	nic=svroce$((RANDOM % 2))
	case $((RANDOM % 4)) in
	0) fault="SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=$nic:$((300 + RANDOM % 2200))" ;;
	1) dn=$((300 + RANDOM % 1200))
	   fault="SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=$nic:$dn SOFTVERBS_FAULT_PORT_UP_AFTER_MS=$nic:$((dn + 500 + RANDOM % 1000)) SOFTVERBS_FAULT_PORT_FLAPS=$((1 + RANDOM % 3))" ;;
	2) fault="SOFTVERBS_FAULT_CUT_AFTER_BYTES=$((1000000 + RANDOM * 1950)) SOFTVERBS_FAULT_CUT_QP=$((1 + RANDOM % 4))" ;;
	*) fault="SOFTVERBS_FAULT_CUT_AFTER_BYTES=$((1000000 + RANDOM * 1950)) SOFTVERBS_FAULT_CUT_QP=$((1 + RANDOM % 4)) SOFTVERBS_FAULT_CUT_DELIVER=1" ;;
	esac
	# shellcheck disable=SC2086 # fault is a list of assignments
	env $fault timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario soak \
		>"$log" 2>&1
	rc=$?
	warns=$(grep -c 'ib: failover:' "$log")
	recs=$(grep -c 'ib: recovery:' "$log")
	sseed=$(grep -m1 -oE 'seed [0-9]+' "$log" | awk '{ print $2 }')
	if [ "$rc" -eq 0 ] && [ "$(grep -c 'soak done: received and verified' "$log")" -eq 2 ] &&
		! grep -Eq 'NCCL WARN NET/braid : ib: (send|receive) comm svroce[0-9]+:[0-9]+[: ]' "$log"; then
		echo "round $round: $fault: passed, $warns failover, $recs recovery WARN(s)"
	else
		echo "FAIL: round $round: $fault: rc $rc (replay: $fault CONF_SOAK_SEED=$sseed)"
		grep -E 'WARN|FAIL' "$log" | head -n 12
		fail=1
	fi
done
[ "$fail" -eq 0 ] || die "failover soak failed"
echo "failover soak: all $ROUNDS rounds passed"
