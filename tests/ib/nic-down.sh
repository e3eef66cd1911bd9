#!/usr/bin/env bash
# A NIC down before connect (issue 19): two "hosts" (processes), each with 2 softverbs
# NICs fused into one device on one flat subnet. NIC 1's port goes down after init has
# listed it (SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=NAME:MS, one device only) and before the
# first comm forms (CONF_START_DELAY_MS). The comms must form on the live NICs, with a
# WARN naming the NIC left out, and move every byte of the data scenarios; softverbs'
# per-QP counts show that no QP on the down NIC carried a byte.
# In these scenarios a listens and accepts, b connects.
#   - NIC 1 down on both hosts: connector and listener each leave theirs out;
#   - NIC 1 down on a only: b pairs all its QPs with a's live NIC (a's handle marks its
#     down NICs), and b's NIC 1 still carries data;
#   - NIC 1 down on b only: b leaves it out, and a's NIC 1 still carries data.
# Before, the comms put QPs on the down port and failed once the retry budget was spent.
set -u
. "$(dirname "$0")/lib.sh"
need "$STAT"
export BRAID_SOCKET_IFNAME=lo BRAID_IB_QPS_PER_CONN=2 NCCL_DEBUG=INFO SOFTVERBS_STATS_KEEP=1
export CONF_START_DELAY_MS=900
dir=$SV_FABRIC.run snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -rf "$dir" "$snap"')
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
SCEN=tiny,stream,groups

HA="SOFTVERBS_DEVICES=sva0:roce:1,sva1:roce:1 SOFTVERBS_SUBNETS=sva0:10.0.0.1/24,sva1:10.0.0.3/24 BRAID_IB_HCA==sva0,sva1 BRAID_MERGE=sva0+sva1"
HB="SOFTVERBS_DEVICES=svb0:roce:1,svb1:roce:1 SOFTVERBS_SUBNETS=svb0:10.0.0.2/24,svb1:10.0.0.4/24 BRAID_IB_HCA==svb0,svb1 BRAID_MERGE=svb0+svb1"

# pair "ENV_A" "ENV_B": a and b run $SCEN, each must pass; a.log, b.log in $dir, $snap
pair() {
	local ea=$1 eb=$2 ra=0 rb=0 pa
	rm -rf "${SV_FABRIC:?}"/* "$dir" && mkdir -p "$dir"
	# shellcheck disable=SC2086 # the host env is words
	env $ea timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 12 --scenario "$SCEN" \
		--role a --dir "$dir" >"$dir/a.log" 2>&1 &
	pa=$!
	# shellcheck disable=SC2086
	env $eb timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 12 --scenario "$SCEN" \
		--role b --dir "$dir" >"$dir/b.log" 2>&1 || rb=$?
	wait $pa || ra=$?
	"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
	grep -hE '^(PASS|FAIL) ' "$dir"/*.log | sed 's/^/  /'
	[ $ra = 0 ] && [ $rb = 0 ] ||
		{ bad "the scenarios failed: rc a=$ra b=$rb"; grep -hE 'FAIL|WARN' "$dir"/*.log | head -n 10; }
}
# bytes the QPs of the NIC at address IP sent, and that QPs sent to it
sent_by() {
	grep '^qp ' "$snap" | grep " sip=$1 " | sed -E 's/.* tx_bytes=([0-9]+) .*/\1/' |
		awk '{ s += $1 } END { print s + 0 }'
}
sent_to() {
	grep '^qp ' "$snap" | grep " dip=$1 " | sed -E 's/.* tx_bytes=([0-9]+) .*/\1/' |
		awk '{ s += $1 } END { print s + 0 }'
}
show() {
	local ip
	for ip in 10.0.0.1 10.0.0.3 10.0.0.2 10.0.0.4; do
		echo "  $ip sent $(sent_by $ip) bytes, received $(sent_to $ip)"
	done
}
# want_warn LOG SIDE NIC: the WARN leaving NIC out, on the connect or accept side
want_warn() {
	grep -q "WARN.*ib: $2 .*: $3:1's port is down: left out of the comm, which runs on 1 of the device's 2 NICs" "$1" ||
		bad "$(basename "$1"): no WARN leaving $3 out on $2"
}

echo "== NIC 1 down on both hosts"
pair "$HA SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=sva1:300" "$HB SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=svb1:300"
show
[ "$(sent_by 10.0.0.3)$(sent_to 10.0.0.3)$(sent_by 10.0.0.4)$(sent_to 10.0.0.4)" = 0000 ] ||
	bad "a QP on a down NIC carried data"
[ "$(sent_to 10.0.0.1)" -gt 0 ] && [ "$(sent_by 10.0.0.2)" -gt 0 ] || bad "the live NICs carried nothing"
want_warn "$dir/a.log" "accept from" sva1
want_warn "$dir/b.log" "connect to" svb1
for side in "accept from" "connect to"; do
	grep -h "WARN.*ib: $side .*left out of the comm" "$dir"/*.log | head -n 1 | sed 's/.*NCCL WARN /  /'
done

echo "== NIC 1 down on host a only"
pair "$HA SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=sva1:300" "$HB"
show
[ "$(sent_by 10.0.0.3)$(sent_to 10.0.0.3)" = 00 ] || bad "a QP on a's down NIC carried data"
grep '^qp ' "$snap" | grep -q ' dip=10\.0\.0\.3 ' && bad "a QP of b was paired with a's down NIC"
[ "$(sent_by 10.0.0.4)" -gt 0 ] || bad "b's live NIC 1 carried nothing"
want_warn "$dir/a.log" "accept from" sva1
grep -q "WARN.*left out of the comm" "$dir/b.log" && bad "b left a live NIC out"

echo "== NIC 1 down on host b only"
pair "$HA" "$HB SOFTVERBS_FAULT_PORT_DOWN_AFTER_MS=svb1:300"
show
[ "$(sent_by 10.0.0.4)$(sent_to 10.0.0.4)" = 00 ] || bad "a QP on b's down NIC carried data"
[ "$(sent_to 10.0.0.3)" -gt 0 ] || bad "a's live NIC 1 carried nothing"
want_warn "$dir/b.log" "connect to" svb1
grep -q "WARN.*left out of the comm" "$dir/a.log" && bad "a left a live NIC out"

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: comms form on the live NICs of a fused device, with a WARN for the one down"
