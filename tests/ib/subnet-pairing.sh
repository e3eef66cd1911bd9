#!/usr/bin/env bash
# Subnet-aware NIC pairing (BRAID_IB_SUBNET_AWARE_ROUTING, as NCCL_IB_SUBNET_AWARE_ROUTING):
# a rail-optimised RoCE fabric of two "hosts" (processes), each with 2 softverbs NICs
# fused into one device, NIC 0 of each on 10.0.0.0/24 and NIC 1 on 10.0.1.0/24, with no
# route between the subnets (SOFTVERBS_SUBNETS).
#   - the same order on both hosts (control), and opposite orders: every byte of the
#     data scenarios arrives, both NICs carry data, and softverbs' per-QP counts show no
#     QP that moved a byte across subnets;
#   - opposite orders with the pairing off (braid's pairing before it, QP i to the peer's
#     NIC i mod 2): the QPs cross subnets, never deliver, and end with RETRY_EXC_ERR;
#   - a third NIC on a subnet the peer lacks: left out with a WARN, data still flows;
#   - no common subnet: connect fails at once with a WARN naming the subnets.
set -u
. "$(dirname "$0")/lib.sh"
need "$STAT"
export BRAID_SOCKET_IFNAME=lo BRAID_IB_QPS_PER_CONN=2 NCCL_DEBUG=INFO SOFTVERBS_STATS_KEEP=1
dir=$SV_FABRIC.run snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -rf "$dir" "$snap"')
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
SCEN=tiny,stream,groups,threads

# host NAME:ADDR ...: the env of a host whose NICs are listed in this order, fused
host() {
	local d="" s="" h="" m="" e
	for e in "$@"; do
		d+="${e%%:*}:roce:1," s+="$e/24," h+="${e%%:*}," m+="${e%%:*}+"
	done
	echo "SOFTVERBS_DEVICES=${d%,} SOFTVERBS_SUBNETS=${s%,} BRAID_IB_HCA==${h%,} BRAID_MERGE=${m%+}"
}
# pair WANT_RC "ENV_A" "ENV_B" [VAR=VALUE...]: a and b run $SCEN; the exit codes must be
# 0 (WANT_RC ok) or both non-zero (fail); a.log, b.log and the counters in $dir, $snap
pair() {
	local want=$1 ea=$2 eb=$3 ra=0 rb=0 pa
	shift 3
	rm -rf "${SV_FABRIC:?}"/* "$dir" && mkdir -p "$dir"
	# shellcheck disable=SC2086 # the host env is words
	env $ea "$@" timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 12 --scenario "$SCEN" \
		--role a --dir "$dir" >"$dir/a.log" 2>&1 &
	pa=$!
	# shellcheck disable=SC2086
	env $eb "$@" timeout 120 "$CONF_BIN" --plugin "$PLUGIN_SO" --api 12 --scenario "$SCEN" \
		--role b --dir "$dir" >"$dir/b.log" 2>&1 || rb=$?
	wait $pa || ra=$?
	"$STAT" -a >"$snap" || die "softverbs-stat -a failed"
	grep -hE '^(PASS|FAIL) ' "$dir"/*.log | sed 's/^/  /'
	if [ "$want" = ok ]; then
		[ $ra = 0 ] && [ $rb = 0 ] ||
			{ bad "the scenarios failed: rc a=$ra b=$rb"; grep -hE 'FAIL|WARN' "$dir"/*.log | head -n 10; }
	else
		[ $ra != 0 ] && [ $rb != 0 ] && [ $ra != 124 ] && [ $rb != 124 ] ||
			bad "want both sides to fail in bounded time: rc a=$ra b=$rb"
	fi
}
# QPs that moved bytes between subnets (sip and dip differ in their first 3 octets)
crossed() {
	grep '^qp ' "$snap" | sed -E 's/.* sip=([0-9.]+) dip=([0-9.]+) tx_bytes=([0-9]+) rx_bytes=([0-9]+) .*/\1 \2 \3 \4/' |
		awk '{ split($1, s, "."); split($2, d, ".")
			if (s[1] "." s[2] "." s[3] != d[1] "." d[2] "." d[3] && $3 + $4 > 0) print }'
}
# bytes each subnet's QPs moved, and a check that each of the two carried some
within() {
	local x
	x=$(crossed)
	[ -z "$x" ] || bad "QPs moved bytes across subnets (sip dip tx rx): $(echo "$x" | head -n 3 | tr '\n' ';')"
	grep '^qp ' "$snap" | sed -E 's/.* sip=([0-9]+\.[0-9]+\.[0-9]+)\.[0-9]+ .* tx_bytes=([0-9]+) .*/\1 \2/' |
		awk '{ b[$1] += $2 } END { for (s in b) printf "  %s.0/24: %d bytes sent\n", s, b[s]
			exit !(b["10.0.0"] > 0 && b["10.0.1"] > 0) }' || bad "both subnets must carry data"
}

A=$(host sva0:10.0.0.1 sva1:10.0.1.1)
echo "== the same order on both hosts (control)"
pair ok "$A" "$(host svb0:10.0.0.2 svb1:10.0.1.2)" BRAID_IB_SUBNET_AWARE_ROUTING=1
within

echo "== opposite orders: each NIC paired with the peer's on its subnet"
pair ok "$A" "$(host svb1:10.0.1.2 svb0:10.0.0.2)" BRAID_IB_SUBNET_AWARE_ROUTING=1
within
grep -h 'ib: send comm .* and more NICs ready' "$dir"/*.log | head -n 1 | grep -q '4 QP(s)' ||
	bad "want send comms over both NICs' 4 QPs"

echo "== opposite orders, pairing off: QP i to the peer's NIC i mod 2 crosses subnets"
SCEN=tiny pair fail "$A" "$(host svb1:10.0.1.2 svb0:10.0.0.2)" BRAID_IB_SUBNET_AWARE_ROUTING=0
grep -hq 'transport retry counter exceeded' "$dir"/*.log ||
	{ grep -h WARN "$dir"/*.log | head -n 5; bad "want a RETRY_EXC_ERR completion"; }
x=$(crossed)
[ -z "$x" ] || bad "a QP across subnets delivered: $x"
grep -q '^qp .* sip=10\.0\.0\.[0-9]* dip=10\.0\.1\.' "$snap" || bad "no QP tried across subnets"

echo "== a third NIC on a subnet the peer lacks: left out with a WARN"
pair ok "$A" "$(host svb2:10.0.2.2 svb1:10.0.1.2 svb0:10.0.0.2)" BRAID_IB_SUBNET_AWARE_ROUTING=1
within
w=$(grep -h 'WARN.*svb2:1 (GID ::ffff:10\.0\.2\.2, subnet 10\.0\.2\.0/24) reaches none of the peer.s NICs .*left out' "$dir/b.log")
echo "$w" | head -n 2 | sed 's/.*NCCL WARN /  /'
echo "$w" | grep -q 'connect to' && echo "$w" | grep -q 'accept from' ||
	bad "want a WARN leaving svb2 out, connecting and accepting"
grep -q '^qp .* sip=10\.0\.2\.' "$snap" && bad "a QP on svb2"

echo "== no common subnet: connect fails with a clear error"
SCEN=tiny pair fail "$A" "$(host svb2:10.0.2.2 svb3:10.0.3.2)" BRAID_IB_SUBNET_AWARE_ROUTING=1
grep -h 'none of the device.s 2 NIC(s) is on a subnet of the peer.s NICs' "$dir"/*.log | head -n 1 |
	sed 's/^/  /' | grep . || bad "no WARN naming the unreachable subnets"

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: NICs paired within their subnets, in either order"
