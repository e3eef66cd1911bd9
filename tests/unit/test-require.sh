#!/usr/bin/env bash
# Strict mode end to end: the built plugin, loaded as NCCL loads it (load_plugin: dlopen,
# ncclNetPlugin_v11, init with a logger), on hosts braid can run on here:
#   libfabric tcp on lo     rdma unmet (one WARN with the fix, init fails), nics=1 met
#   softverbs (verbs, RoCE) rdma met; gdr unmet without peer memory, met with it
#                           (BRAID_FSROOT host trees); rails=N against hwloc fixtures
#                           (tests/topo), the softverbs NICs named as the fixture's
# and a malformed BRAID_REQUIRE refused with the entry named. docs/strict.md.
set -u
BUILD=${BUILD:-build}
so="$BUILD/libnccl-net-braid.so"
loader="$BUILD/tests/unit/load_plugin"
sv="$BUILD/softverbs"
for f in "$so" "$loader" "$sv/libibverbs.so.1"; do
	[ -e "$f" ] || { echo "FAIL: $f is missing: run make first"; exit 1; }
done
tmp=$(mktemp -d /tmp/braid-require.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }

# run WANT_RC REQUIRE [VAR=VALUE...]: init with BRAID_REQUIRE=REQUIRE; output in $tmp/out
run() {
	local want=$1 req=$2 rc
	shift 2
	echo "== BRAID_REQUIRE='$req' $*"
	env BRAID_REQUIRE="$req" "$@" timeout 60 "$loader" "$so" >"$tmp/out" 2>&1
	rc=$?
	grep -E 'WARN|init:|BRAID_REQUIRE' "$tmp/out" | sed 's/^/  /'
	[ $rc = "$want" ] || bad "load_plugin exit $rc, want $want (0 init ok, 1 init failed)"
}
has() { grep -q -- "$1" "$tmp/out" || bad "no line with '$1'"; }
hasnt() { ! grep -q -- "$1" "$tmp/out" || bad "a line with '$1'"; }
# the number of strict-mode WARNs must be exactly $1
req_warns() {
	local n
	n=$(grep -c '^WARN.*BRAID_REQUIRE' "$tmp/out")
	[ "$n" = "$1" ] || bad "$n BRAID_REQUIRE WARN line(s), want $1"
}

# ---- libfabric tcp;ofi_rxm on lo: a slow path by braid's own record
tcp=(BRAID_BACKEND=ofi "BRAID_OFI_PROVIDER=tcp;ofi_rxm" BRAID_SOCKET_IFNAME=lo FI_TCP_IFACE=lo
	HWLOC_XMLFILE=tests/topo/no-gpu.xml)
run 1 rdma "${tcp[@]}"
req_warns 1
has '^WARN.*BRAID_REQUIRE rdma: not met: braid runs over libfabric tcp;ofi_rxm'
has 'not NIC RDMA'
has 'Fix: unset BRAID_OFI_PROVIDER (it names tcp;ofi_rxm)'
has 'with NCCL_NET=braid the job stops at start'
hasnt 'every requirement met'

run 0 nics=1 "${tcp[@]}"
req_warns 0
has '^INFO.*BRAID_REQUIRE=nics=1: every requirement met'
has 'summary: why: .*BRAID_REQUIRE=nics=1: met'

run 1 'nics=1,rdma,nic_speed=100000' "${tcp[@]}"
req_warns 2
has 'BRAID_REQUIRE rdma: not met'
has 'BRAID_REQUIRE nic_speed=100000: not met: NIC(s) below 100000 Gbit/s: lo at'

run 1 'rdma,rails' "${tcp[@]}"
req_warns 1
has "^WARN.*BRAID_REQUIRE=\"rdma,rails\": \"rails\" needs a value: rails=N"
run 1 'rdma;gdr' "${tcp[@]}"
has "^WARN.*unknown requirement \"rdma;gdr\""

# ---- softverbs: verbs over RoCE, two NICs
fabric="$tmp/fabric" roots="$tmp/roots"
mkdir -p "$fabric" "$roots/none" "$roots/peermem/sys/module/nvidia_peermem"
echo 1 >"$roots/peermem/sys/module/nvidia_peermem/version"
ib=(LD_LIBRARY_PATH="$sv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SOFTVERBS_FABRIC="$fabric"
	BRAID_BACKEND=ib BRAID_SOCKET_IFNAME=lo BRAID_FSROOT="$roots/none"
	SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 HWLOC_XMLFILE=tests/topo/no-gpu.xml)
run 0 'rdma,backend=ib,nics=2' "${ib[@]}"
req_warns 0
has 'every requirement met'

run 1 'rdma,gdr' "${ib[@]}"
req_warns 1
hasnt 'BRAID_REQUIRE rdma: not met'
has '^WARN.*BRAID_REQUIRE gdr: not met: GPUDirect RDMA is off for 2 of 2 ib NIC(s) (first: svroce0)'
has 'Fix: load nvidia_peermem'

run 0 'rdma,gdr' "${ib[@]}" BRAID_FSROOT="$roots/peermem"
req_warns 0

run 1 'backend=ofi,provider=efa' "${ib[@]}"
req_warns 2
has 'BRAID_REQUIRE backend=ofi: not met: braid runs the ib backend'
has 'BRAID_REQUIRE provider=efa: not met: .*not libfabric'

# ---- rails: softverbs NICs named as the fixture's (4 GPUs, one rail of mlx5_0 + mlx5_1)
remote=(HWLOC_XMLFILE=tests/topo/2socket-remote-nics.xml)
run 0 rails=2 "${ib[@]}" "${remote[@]}" SOFTVERBS_DEVICES=mlx5_0:roce:1,mlx5_1:roce:1
req_warns 0
run 1 rails=3 "${ib[@]}" "${remote[@]}" SOFTVERBS_DEVICES=mlx5_0:roce:1,mlx5_1:roce:1
req_warns 1
has 'BRAID_REQUIRE rails=3: not met: 4 of 4 GPU(s) have fewer than 3'
has 'this host has fewer NICs per GPU than asked'
run 1 rails=2 "${ib[@]}" "${remote[@]}" SOFTVERBS_DEVICES=mlx5_0:roce:1
has '(mlx5_0, mlx5_1), braid uses 1'
has 'braid does not use every NIC of the rail'
# 8 GPUs, one NIC per pair: braid on two of the four NICs leaves four GPUs without one
run 1 rails=1 "${ib[@]}" HWLOC_XMLFILE=tests/topo/8gpu-nic-per-pair.xml \
	SOFTVERBS_DEVICES=mlx5_0:roce:1,mlx5_1:roce:1
has '4 of 8 GPU(s) have fewer than 1'
has '0000:93:00.0 (cuda4): rail 2 has 1 NIC(s) in the topology (mlx5_2), braid uses 0'
run 1 rails=1 "${ib[@]}"
has 'rails=1: not met: cannot be checked: the topology (tests/topo/no-gpu.xml) shows no GPU'

[ $fails = 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo "strict mode: every requirement met or failed as the host is"
