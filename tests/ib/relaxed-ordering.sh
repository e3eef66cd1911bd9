#!/usr/bin/env bash
# NCCL_IB_PCI_RELAXED_ORDERING (docs/ib.md): NCCL registers memory with
# IBV_ACCESS_RELAXED_ORDERING when the variable is 1 or 2 (the default) and libibverbs has
# ibv_reg_mr_iova2; 0 turns it off. softverbs logs each registration's access flags
# (SOFTVERBS_DEBUG=1); the data registrations of a conformance run must carry the flag by
# default and with 1, and never with 0. The run still moves its data, every byte checked.
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
log=$SV_FABRIC.log
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }

run() { # VALUE (empty: unset): the tiny scenario; sets ro= and plain= (MR lines)
	if [ -n "$1" ]; then export NCCL_IB_PCI_RELAXED_ORDERING=$1; else unset NCCL_IB_PCI_RELAXED_ORDERING; fi
	SOFTVERBS_DEBUG=1 timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario tiny \
		>"$log" 2>&1 || bad "the run with NCCL_IB_PCI_RELAXED_ORDERING=${1:-unset} failed: $(tail -3 "$log")"
	ro=$(grep -c 'MR 0x[0-9a-f]*: .*(relaxed ordering)' "$log")
	plain=$(grep 'MR 0x[0-9a-f]*: ' "$log" | grep -vc '(relaxed ordering)')
	echo "  NCCL_IB_PCI_RELAXED_ORDERING=${1:-unset}: $ro registrations with relaxed ordering, $plain without"
}

run ""
[ "$ro" -gt 0 ] || bad "default (2): no registration with relaxed ordering"
run 1
[ "$ro" -gt 0 ] || bad "1: no registration with relaxed ordering"
run 0
[ "$ro" = 0 ] || bad "0: $ro registration(s) with relaxed ordering"
[ "$plain" -gt 0 ] || bad "0: no registration seen at all"

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: relaxed ordering as NCCL_IB_PCI_RELAXED_ORDERING says"
