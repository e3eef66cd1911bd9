#!/usr/bin/env bash
# Conformance across two network namespaces joined by a veth pair (tcp;ofi_rxm over the
# veth; the out-of-band handshake over it too). The two sides meet through files in a
# temporary directory: namespaces share the filesystem. Needs root.
set -u
. "$(dirname "$0")/lib.sh"
netns_prereqs

id=$$
nsa=braid-a-$id nsb=braid-b-$id
veth_a=brda$id veth_b=brdb$id          # interface names must stay under 16 bytes
addr_a=192.0.2.201 addr_b=192.0.2.202  # TEST-NET-1; each lives only in its namespace
tmp=$(mktemp -d /tmp/braid-netns.XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]+"${pids[@]}"}"; do kill -KILL "$p" 2>/dev/null; done
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
	ip link del "$veth_a" 2>/dev/null  # only if it never moved into a namespace
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

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
ip -n "$nsa" -br addr; ip -n "$nsb" -br addr

so=$(cd "$(dirname "$PLUGIN_SO")" && pwd)/$(basename "$PLUGIN_SO")
seed=${CONF_SEED:-$(( (RANDOM << 15) | RANDOM ))}
common=(env BRAID_BACKEND=ofi BRAID_OFI_PROVIDER='tcp;ofi_rxm')

ip netns exec "$nsa" "${common[@]}" BRAID_SOCKET_IFNAME="$veth_a" FI_TCP_IFACE="$veth_a" \
	"$CONF_BIN" --plugin "$so" --role a --dir "$tmp" --seed "$seed" "$@" &
pids+=($!)
ip netns exec "$nsb" "${common[@]}" BRAID_SOCKET_IFNAME="$veth_b" FI_TCP_IFACE="$veth_b" \
	"$CONF_BIN" --plugin "$so" --role b --dir "$tmp" --seed "$seed" "$@" &
pids+=($!)
wait "${pids[0]}"; rc_a=$?
wait "${pids[1]}"; rc_b=$?
pids=()
echo "side a ($nsa, $addr_a): exit $rc_a; side b ($nsb, $addr_b): exit $rc_b"
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] || die "conformance across namespaces (seed $seed)"

# braid perf between the namespaces: --server in one, --client in the other
braid=$(cd "$BUILD" && pwd)/braid
if [ -x "$braid" ] && [ -z "${CONF_NETNS_SCENARIOS_ONLY:-}" ]; then # kills.sh: the scenario only
	port=$((20000 + id % 20000))
	popts=(--backend ofi --provider 'tcp;ofi_rxm' --plugin "$so" --port "$port" --min 64
		--max 1M --iters 20 --warmup 2 --lat-iters 100 --timeout 30)
	ip netns exec "$nsa" env BRAID_SOCKET_IFNAME="$veth_a" FI_TCP_IFACE="$veth_a" 		timeout 120 "$braid" perf --server "${popts[@]}" >"$tmp/perf.server" 2>&1 &
	pids+=($!)
	ip netns exec "$nsb" env BRAID_SOCKET_IFNAME="$veth_b" FI_TCP_IFACE="$veth_b" 		timeout 120 "$braid" perf --client "$addr_a" "${popts[@]}" >"$tmp/perf.client" 2>&1
	rc_c=$?
	wait "${pids[0]}"; rc_s=$?
	pids=()
	grep -hv 'SLOW PATH' "$tmp/perf.server" "$tmp/perf.client"
	[ "$rc_s" -eq 0 ] && [ "$rc_c" -eq 0 ] || die "braid perf across namespaces: server $rc_s, client $rc_c"
	grep -q '^# data check: every verified iteration was right' "$tmp/perf.server" ||
		die "braid perf across namespaces: no clean data check"
fi
echo "netns: all passed"
