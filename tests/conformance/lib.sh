# Shared by the conformance test scripts (sourced). They run from the repository root
# with BUILD in the environment; exit 0 pass, 77 skip (reason on the last line), else fail.

BUILD=${BUILD:-build}
CONF_BIN=$BUILD/tests/conformance/conformance
PLUGIN_SO=$BUILD/libnccl-net-braid.so
CONF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
need() { for f; do [ -e "$f" ] || die "$f is missing: run make first"; done; } # built files
# What the namespace tests need: root, ip(8), libfabric's tcp provider (else a SKIP).
netns_prereqs() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
	command -v ip >/dev/null || skip "no ip(8) (iproute2)"
	fi_info -p tcp >/dev/null 2>&1 || skip "libfabric has no tcp provider (fi_info -p tcp)"
}

need "$CONF_BIN" "$PLUGIN_SO"

# Two network namespaces, $nsa and $nsb, joined by two veth pairs, one subnet each: $a1
# (198.18.1.1/24) to $b1 (198.18.1.2), $a2 (198.18.2.1) to $b2 (198.18.2.2), lo up in each;
# the tests' hosts, a pair per rail. RATE_MBIT=N shapes each veth with tc (tbf), the
# second pair at RATE_MBIT2 if set. At exit: the background $pids are sent KILL_SIG (KILL
# unless set), and the namespaces, veths and $tmp (made here, named after NAME) go. Skips
# where namespaces or veths cannot be made.
netns_two_pairs() { # NAME
	local p x y rate ns ifc

	id=$$
	nsa=braid-fa-$id nsb=braid-fb-$id
	a1=bfa1$id a2=bfa2$id b1=bfb1$id b2=bfb2$id # interface names stay under 16 bytes
	tmp=$(mktemp -d "/tmp/braid-$1.XXXXXX")
	pids=()
	trap netns_two_pairs_cleanup EXIT
	trap 'exit 1' INT TERM
	ip netns add "$nsa" || skip "cannot create a network namespace here (ip netns add failed)"
	ip netns add "$nsb" || skip "cannot create a second network namespace"
	for p in 1 2; do
		eval "x=\$a$p y=\$b$p"
		ip link add "$x" type veth peer name "$y" || skip "cannot create a veth pair"
		{ ip link set "$x" netns "$nsa" && ip link set "$y" netns "$nsb"; } || die "moving veths"
		ip -n "$nsa" addr add "198.18.$p.1/24" dev "$x" || die "address on $x"
		ip -n "$nsb" addr add "198.18.$p.2/24" dev "$y" || die "address on $y"
		{ ip -n "$nsa" link set "$x" up && ip -n "$nsb" link set "$y" up; } || die "veth up"
		[ -n "${RATE_MBIT:-}" ] || continue
		rate=$RATE_MBIT
		[ "$p" = 2 ] && rate=${RATE_MBIT2:-$RATE_MBIT}
		for ns in "$nsa $x" "$nsb $y"; do
			read -r ns ifc <<<"$ns"
			ip netns exec "$ns" tc qdisc add dev "$ifc" root tbf rate "${rate}mbit" \
				burst 256kb latency 50ms || die "tc on $ifc"
		done
	done
	for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up || die "lo up in $ns"; done
}
# Pair 2 again, through a bridge in a third namespace ($nsm): a2 - (bridge) - b2, same
# addresses. A side's interface then goes down alone: the other keeps its carrier (its
# peer is the bridge's port), as a port down on one end of a real fabric link.
netns_pair2_via_bridge() {
	nsm=braid-fm-$id
	ip -n "$nsa" link del "$a2" || die "removing the veth pair $a2/$b2"
	ip netns add "$nsm" || die "cannot create a third network namespace"
	ip -n "$nsm" link add br2 type bridge || die "a bridge in $nsm"
	ip -n "$nsm" link set br2 up || die "bridge up"
	netns_bridge_port a
	netns_bridge_port b
}
# Side a's or b's pair-2 interface ($a2, 198.18.2.1 or $b2, .2), a port of the bridge,
# up; with MAC, that address (one deleted and made again keeps it, as a NIC after a
# driver reset does, so the other side's neighbour entry stays right).
netns_bridge_port() { # a|b [MAC]
	local m=$1 ifc ns addr

	eval "ifc=\$${m}2 ns=\$ns$m"
	addr=198.18.2.$([ "$m" = a ] && echo 1 || echo 2)
	ip link add "bfm${m}2$id" type veth peer name "$ifc" ${2:+address "$2"} ||
		die "veth to the bridge"
	ip link set "bfm${m}2$id" netns "$nsm" && ip link set "$ifc" netns "$ns" ||
		die "moving the bridge's veths"
	ip -n "$nsm" link set "bfm${m}2$id" master br2 && ip -n "$nsm" link set "bfm${m}2$id" up ||
		die "bridge port bfm${m}2$id"
	ip -n "$ns" addr add "$addr/24" dev "$ifc" && ip -n "$ns" link set "$ifc" up ||
		die "$ifc: address and up"
}
netns_two_pairs_cleanup() {
	for p in "${pids[@]+"${pids[@]}"}"; do kill "-${KILL_SIG:-KILL}" "$p" 2>/dev/null; done
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
	[ -z "${nsm:-}" ] || ip netns del "$nsm" 2>/dev/null
	ip link del "$a1" 2>/dev/null
	ip link del "$a2" 2>/dev/null
	rm -rf "$tmp"
}

# Under SAN=1 the plugin's leaks are failures; only libfabric's own (internal caches
# it never frees) are suppressed, by name, in lsan.supp.
export LSAN_OPTIONS="suppressions=$CONF_DIR/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

is_san_build() {
	ldd "$PLUGIN_SO" 2>/dev/null | grep -q 'libasan' || nm "$CONF_BIN" 2>/dev/null | grep -q '__asan_init'
}
