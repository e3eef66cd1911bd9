#!/usr/bin/env bash
# The conformance suite, unchanged, on the ib backend across two network namespaces
# joined by a veth pair: softverbs sees two hosts (GIDs, LIDs and GUIDs differ), the RoCE
# GID carries the veth's IPv4 address, the handshake goes over the veth. Both link layers
# (RoCE, then InfiniBand). The namespaces share the softverbs fabric directory. Needs root.
set -u
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "no ip(8) (iproute2)"

id=$$
nsa=braid-iba-$id nsb=braid-ibb-$id
veth_a=bria$id veth_b=brib$id           # interface names must stay under 16 bytes
addr_a=198.51.100.61 addr_b=198.51.100.62  # TEST-NET-2; each lives only in its namespace
tmp=$(mktemp -d /tmp/braid-ibns.XXXXXX)
pids=()
IB_CLEANUP+=('for p in "${pids[@]+"${pids[@]}"}"; do kill -KILL "$p" 2>/dev/null; done'
	'ip netns del "$nsa" 2>/dev/null' 'ip netns del "$nsb" 2>/dev/null'
	'ip link del "$veth_a" 2>/dev/null' 'rm -rf "$tmp"')

ip netns add "$nsa" || skip "cannot create a network namespace here (ip netns add failed)"
ip netns add "$nsb" || skip "cannot create a second network namespace"
ip link add "$veth_a" type veth peer name "$veth_b" || skip "cannot create a veth pair"
ip link set "$veth_a" netns "$nsa" || die "moving $veth_a into $nsa"
ip link set "$veth_b" netns "$nsb" || die "moving $veth_b into $nsb"
ip -n "$nsa" addr add "$addr_a/24" dev "$veth_a" || die "address on $veth_a"
ip -n "$nsb" addr add "$addr_b/24" dev "$veth_b" || die "address on $veth_b"
for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up || die "lo up in $ns"; done
ip -n "$nsa" link set "$veth_a" up || die "$veth_a up"
ip -n "$nsb" link set "$veth_b" up || die "$veth_b up"

so=$(cd "$(dirname "$PLUGIN_SO")" && pwd)/$(basename "$PLUGIN_SO")
bin=$(cd "$(dirname "$CONF_BIN")" && pwd)/$(basename "$CONF_BIN")
seed=${CONF_SEED:-$(( (RANDOM << 15) | RANDOM ))}
fail=0
for dev in svroce0:roce svib0:ib; do
	name=${dev%%:*}
	rm -rf "$tmp"/*
	common=(env SOFTVERBS_DEVICES="$dev:1" BRAID_IB_HCA="=$name" BRAID_DEBUG=INFO)
	ip netns exec "$nsa" "${common[@]}" BRAID_SOCKET_IFNAME="$veth_a" \
		"$bin" --plugin "$so" --role a --dir "$tmp" --seed "$seed" "$@" >"$tmp.a.log" 2>&1 &
	pids=($!)
	ip netns exec "$nsb" "${common[@]}" BRAID_SOCKET_IFNAME="$veth_b" \
		"$bin" --plugin "$so" --role b --dir "$tmp" --seed "$seed" "$@" >"$tmp.b.log" 2>&1 &
	pids+=($!)
	wait "${pids[0]}"; rc_a=$?
	wait "${pids[1]}"; rc_b=$?
	pids=()
	grep -E '^(PASS|FAIL)|FAIL:' "$tmp.a.log" "$tmp.b.log" | sed "s/^/[$name] /"
	# The RoCE GID must be the veth's address: proof the two sides are two "hosts".
	# (kills.sh sets CONF_NETNS_SCENARIOS_ONLY: a kill at connect leaves no peer GID to see)
	if [ "$name" = svroce0 ] && [ -z "${CONF_NETNS_SCENARIOS_ONLY:-}" ]; then
		grep -q "::ffff:$addr_b" "$tmp.a.log" || { echo "side a never saw peer GID ::ffff:$addr_b"; fail=1; }
	fi
	echo "$name: side a ($nsa, $addr_a): exit $rc_a; side b ($nsb, $addr_b): exit $rc_b"
	if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ]; then
		tail -n 30 "$tmp.a.log" "$tmp.b.log"
		fail=1
	fi
	rm -f "$tmp.a.log" "$tmp.b.log"
done
[ "$fail" -eq 0 ] || die "ib conformance across namespaces (seed $seed)"
echo "ib netns: all passed"
