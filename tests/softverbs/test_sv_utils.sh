#!/usr/bin/env bash
# softverbs: rdma-core's own unmodified programs (Debian ibverbs-utils) on
# softverbs through LD_LIBRARY_PATH: ibv_devices, ibv_devinfo, and
# ibv_rc_pingpong between two processes, on a RoCE device (with -g) and on an
# IB device, in one network namespace and across two (veth pair, addresses
# from TEST-NET-2, 198.51.100.0/24).
set -u
BUILD=${BUILD:-build}
LIB=$(cd "$BUILD/softverbs" && pwd) || { echo "no $BUILD/softverbs"; exit 1; }
for p in ibv_devices ibv_devinfo ibv_rc_pingpong; do
	command -v $p >/dev/null || { echo "SKIP: $p not installed (ibverbs-utils)"; exit 77; }
done

export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SOFTVERBS_FABRIC=$(mktemp -d /tmp/svf.XXXXXX)
export SOFTVERBS_DEVICES="svroce0:roce:1,svib0:ib:1"
# An ASan-built library inside non-ASan programs needs the runtime first.
if readelf -d "$LIB/libibverbs.so.1" | grep -q 'libasan'; then
	export LD_PRELOAD=$(${CC:-cc} -print-file-name=libasan.so)
	export ASAN_OPTIONS=detect_leaks=0	# leaks of the ibv_* programs are not ours
fi

NS_A=svA$$ NS_B=svB$$
pids=()
cleanup() {
	for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null; done
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	rm -rf "$SOFTVERBS_FABRIC"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

echo "== ibv_devices"
out=$(timeout 10 ibv_devices) || fail "ibv_devices: rc $?"
echo "$out"
grep -q svroce0 <<<"$out" && grep -q svib0 <<<"$out" || fail "ibv_devices lists no softverbs device"

echo "== ibv_devinfo -v"
out=$(timeout 10 ibv_devinfo -v) || fail "ibv_devinfo: rc $?"
grep -q 'link_layer:.*Ethernet' <<<"$out" || fail "no Ethernet port"
grep -q 'link_layer:.*InfiniBand' <<<"$out" || fail "no InfiniBand port"
grep -q 'GID\[  3\]:.*::ffff:.*RoCE v2' <<<"$out" || fail "no IPv4 RoCEv2 GID at index 3"
grep -q 'GID\[  0\]:.*fe80.*RoCE v1' <<<"$out" || fail "no link-local RoCEv1 GID at index 0"
grep -q 'state:.*PORT_ACTIVE' <<<"$out" || fail "port not active"
timeout 10 ibv_devinfo -d svib0 | grep -q 'port_lid:[[:space:]]*[1-9]' || fail "IB port has no LID"

# in_ns NS CMD...: run in a namespace, or here when NS is empty.
in_ns() {
	local ns=$1
	shift
	if [ -n "$ns" ]; then ip netns exec "$ns" env "$@"; else env "$@"; fi
}

# wait_listen NS PORT: until the server's TCP port listens (bounded, 10 s).
wait_listen() {
	for _ in $(seq 100); do
		in_ns "$1" ss -ltn 2>/dev/null | grep -q ":$2 " && return 0
		sleep 0.1
	done
	return 1
}

# pingpong NAME SRV_NS CLI_NS SRV_ADDR ARGS...: one ibv_rc_pingpong pair.
port=$((20000 + $$ % 20000))
pingpong() {
	local name=$1 sns=$2 cns=$3 addr=$4
	shift 4
	port=$((port + 1))
	# Skip ports some other test already listens on.
	while in_ns "$sns" ss -ltn 2>/dev/null | grep -q ":$port "; do port=$((port + 1)); done
	echo "== ibv_rc_pingpong $name: $*"
	in_ns "$sns" timeout 30 ibv_rc_pingpong -p $port "$@" >"$SOFTVERBS_FABRIC/srv.log" 2>&1 &
	local spid=$!
	pids+=("$spid")
	wait_listen "$sns" $port || fail "$name: server did not listen"
	in_ns "$cns" timeout 30 ibv_rc_pingpong -p $port "$@" "$addr" >"$SOFTVERBS_FABRIC/cli.log" 2>&1
	local crc=$?
	wait "$spid"
	local src=$?
	echo "-- server"; cat "$SOFTVERBS_FABRIC/srv.log"
	echo "-- client"; cat "$SOFTVERBS_FABRIC/cli.log"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || fail "$name: client rc $crc, server rc $src"
	grep -q 'iters in' "$SOFTVERBS_FABRIC/cli.log" || fail "$name: no result line"
}

pingpong roce-v2 "" "" 127.0.0.1 -d svroce0 -g 3 -n 200
pingpong roce-v1-events "" "" 127.0.0.1 -d svroce0 -g 0 -n 200 -e
pingpong ib "" "" 127.0.0.1 -d svib0 -n 200
pingpong ib-events-big "" "" 127.0.0.1 -d svib0 -n 50 -s 1048576 -e -c

echo "== two network namespaces"
if [ "$(id -u)" -ne 0 ] || ! ip netns add "$NS_A" 2>/dev/null; then
	echo "SKIP: cannot create network namespaces (need root): one-namespace runs passed"
	exit 77
fi
ip netns add "$NS_B" || fail "ip netns add $NS_B"
ip link add "va$$" type veth peer name "vb$$" || fail "veth"
ip link set "va$$" netns "$NS_A" && ip link set "vb$$" netns "$NS_B" || fail "veth to netns"
ip -n "$NS_A" addr add 198.51.100.1/24 dev "va$$"
ip -n "$NS_B" addr add 198.51.100.2/24 dev "vb$$"
for ns in "$NS_A" "$NS_B"; do
	ip -n "$ns" link set lo up
done
ip -n "$NS_A" link set "va$$" up
ip -n "$NS_B" link set "vb$$" up

pingpong netns-roce "$NS_A" "$NS_B" 198.51.100.1 -d svroce0 -g 3 -n 200
grep -q 'local address:.*GID ::ffff:198.51.100.2' "$SOFTVERBS_FABRIC/cli.log" ||
	fail "client GID is not its namespace's IPv4"
grep -q 'remote address:.*GID ::ffff:198.51.100.1' "$SOFTVERBS_FABRIC/cli.log" ||
	fail "server GID is not its namespace's IPv4"
pingpong netns-ib "$NS_A" "$NS_B" 198.51.100.1 -d svib0 -n 200
l1=$(sed -n 's/.*local address:  LID \(0x[0-9a-f]*\).*/\1/p' "$SOFTVERBS_FABRIC/cli.log")
l2=$(sed -n 's/.*remote address: LID \(0x[0-9a-f]*\).*/\1/p' "$SOFTVERBS_FABRIC/cli.log")
[ -n "$l1" ] && [ "$l1" != "$l2" ] || fail "the two namespaces share LID $l1"
echo "PASS"
