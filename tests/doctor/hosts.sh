#!/usr/bin/env bash
# braid doctor against the fixture hosts of tests/doctor/hosts/ (trees of /sys, /proc and
# /dev files read through --root) and the topologies of tests/topo/: each bad host turns
# its check to WARN or FAIL and sets the exit status; the good host passes everything
# that can be read from files.
# shellcheck source=tests/doctor/lib.sh
. "$(dirname "$0")/lib.sh"
HOSTGROUPS=dev,memlock,port,gid,ecn,pfc,gpudirect,topo,acs,iommu
GOOD_XML=$TOPO/8gpu-nic-per-pair.xml

doc --root "$HOSTS/roce-good" --xml "$GOOD_XML" --only $HOSTGROUPS
status dev.infiniband PASS "good RoCE host"
status memlock PASS "good RoCE host"
status "port mlx5_0:1" PASS "good RoCE host"
status "gid mlx5_0:1" PASS "good RoCE host"
has 'braid would pick GID index 3: ::ffff:10.0.0.1, RoCE v2 on eth2' "good RoCE host: the IPv4 RoCE v2 GID"
status "ecn eth2" PASS "good RoCE host"
status "pfc eth2" INFO "good RoCE host: PFC is netlink only, never a PASS under --root"
status gpudirect PASS "good RoCE host"
status "topo gpu0" PASS "good RoCE host"
status iommu PASS "good RoCE host"
rc 0 "good RoCE host"

doc --root "$HOSTS/roce-no-ecn" --only port,ecn,pfc
status "ecn eth2" WARN "RoCE without ECN"
status "pfc eth2" INFO "RoCE without ECN: PFC not claimed"
rc 1 "RoCE without ECN"

NCCL_IB_GID_INDEX=2 doc --root "$HOSTS/roce-good" --only gid
status "gid mlx5_0:1" FAIL "NCCL_IB_GID_INDEX=2, a RoCE v1 GID"
has 'RoCE v1 is not routable; RoCE v2 is at index 3' "NCCL_IB_GID_INDEX=2: says where v2 is"
rc 2 "NCCL_IB_GID_INDEX=2"
NCCL_IB_GID_INDEX=7 doc --root "$HOSTS/roce-good" --only gid
status "gid mlx5_0:1" FAIL "NCCL_IB_GID_INDEX=7, no such GID"
rc 2 "NCCL_IB_GID_INDEX=7"
NCCL_IB_GID_INDEX=1 doc --root "$HOSTS/roce-good" --only gid
status "gid mlx5_0:1" WARN "NCCL_IB_GID_INDEX=1, RoCE v2 link-local, not NCCL's pick"
rc 1 "NCCL_IB_GID_INDEX=1"
NCCL_IB_GID_INDEX=3 doc --root "$HOSTS/roce-good" --only gid
status "gid mlx5_0:1" PASS "NCCL_IB_GID_INDEX=3, NCCL's own pick"
rc 0 "NCCL_IB_GID_INDEX=3"

# The GID doctor names is the one net_ib picks (the rule of plugin/gid.c, documented at
# BRAID_IB_GID_INDEX): the first GID of the address family, not IPv6 link-local, within
# BRAID_IB_ADDR_RANGE (alias NCCL_IB_ADDR_RANGE), not RoCE v1; when only RoCE v1 GIDs
# fit, the first of them. A port with two IPv4 GIDs: 10.0.0.1 (2 v1, 3 v2) and
# 192.168.7.1 (4 v1, 5 v2).
two_v4_host "$T/two-v4"
doc --root "$T/two-v4" --only gid
has 'braid would pick GID index 3: ::ffff:10.0.0.1, RoCE v2' "two IPv4 GIDs, no range: the first"
for var in BRAID_IB_ADDR_RANGE NCCL_IB_ADDR_RANGE; do
	env "$var=192.168.0.0/16" "$BRAID" doctor --root "$T/two-v4" --only gid >"$OUT" 2>&1
	RC=$?
	status "gid mlx5_0:1" PASS "$var=192.168.0.0/16"
	has 'braid would pick GID index 5: ::ffff:192.168.7.1, RoCE v2 on eth2 \(first RoCEv2 IPv4 GID in 192.168.0.0/16 \(skipped 0 link-local, 1 link-local, 2 range, 3 range, 4 RoCEv1\)\)' \
		"$var=192.168.0.0/16: the RoCE v2 GID in the range, the skips named"
	rc 0 "$var=192.168.0.0/16"
done
BRAID_IB_ADDR_RANGE=172.16.0.0/12 doc --root "$T/two-v4" --only gid
status "gid mlx5_0:1" FAIL "BRAID_IB_ADDR_RANGE that no GID is in"
has 'has no IPv4 RoCE GID in 172.16.0.0/12' "BRAID_IB_ADDR_RANGE that no GID is in: said"
rc 2 "BRAID_IB_ADDR_RANGE that no GID is in"
BRAID_IB_ADDR_RANGE=192.168.7.1 doc --root "$T/two-v4" --only gid
has 'BRAID_IB_ADDR_RANGE="192.168.7.1" is not an address/prefix: braid ignores it' \
	"BRAID_IB_ADDR_RANGE without a prefix: ignored, as net_ib ignores it"
has 'braid would pick GID index 3' "BRAID_IB_ADDR_RANGE without a prefix: any address"
rc 1 "BRAID_IB_ADDR_RANGE without a prefix"

# Only RoCE v1 GIDs (a netdev whose RoCE v2 entries are gone): net_ib falls back to the
# first RoCE v1 GID that fits; doctor names it, with a WARN (v1 is not routable).
v1_only_host "$T/v1-only"
doc --root "$T/v1-only" --only gid
status "gid mlx5_0:1" WARN "RoCE v1 GIDs only"
has 'braid would pick GID index 2: ::ffff:10.0.0.1, IB/RoCE v1 on eth2 \(no RoCEv2 GID fits; RoCEv1 fallback\): RoCE v1 is not routable' \
	"RoCE v1 GIDs only: the fallback named"
rc 1 "RoCE v1 GIDs only"

doc --root "$HOSTS/no-peermem" --only gpudirect
status gpudirect FAIL "no peermem, kernel 5.4 (no dma-buf)"
rc 2 "no peermem"

doc --root "$HOSTS/memlock-64k" --only memlock
status memlock FAIL "64 KiB memlock"
has 'memlock limit is 64 KiB' "64 KiB memlock: the limit named"
rc 2 "64 KiB memlock"

doc --root "$HOSTS/container-no-dev" --only dev
status dev.infiniband FAIL "container without /dev/infiniband"
rc 2 "container without /dev/infiniband"

doc --root "$HOSTS/roce-good" --xml "$TOPO/2socket-remote-nics.xml" --only topo
status "topo gpu0" WARN "NIC on the other socket"
has 'is SYS/10, on the other socket' "NIC on the other socket: SYS named"
rc 1 "NIC on the other socket"
HWLOC_XMLFILE=$TOPO/2socket-remote-nics.xml doc --root "$HOSTS/roce-good" --only topo
status "topo gpu3" WARN "NIC on the other socket, topology from HWLOC_XMLFILE"

# ACS: the two switch ports between GPU 0000:13:00.0 and mlx5_0 get a config space with
# an ACS extended capability at 0x100; control (offset 6) 0: PASS, RR|CR (0x0c): WARN.
cp -a "$HOSTS/roce-good" "$T/acs"
acs_config() { # FILE CTL: 256 bytes of zeros, then the ACS header and the control word
	{ head -c 256 /dev/zero; printf '\x0d\x00\x01\x00\x00\x00%b\x00' "$2"; } >"$1"
}
for port in 0000:12:00.0 0000:12:02.0; do
	acs_config "$T/acs/sys/bus/pci/devices/$port/config" '\x00'
done
doc --root "$T/acs" --xml "$GOOD_XML" --only acs
status "acs gpu0" PASS "ACS off on the switch ports"
rc 0 "ACS off"
acs_config "$T/acs/sys/bus/pci/devices/0000:12:02.0/config" '\x1d'
doc --root "$T/acs" --xml "$GOOD_XML" --only acs
status "acs gpu0" WARN "ACS P2P redirect on the NIC's switch port"
has '0000:12:02.0 \(ACSCtl 0x1d\)' "ACS redirect: the port named"
rc 1 "ACS redirect"

# IOMMU: mlx5_0's group in DMA-FQ (translated) mode: WARN; identity: PASS.
mkdir -p "$T/acs/sys/kernel/iommu_groups/7"
ln -s ../../../../../../kernel/iommu_groups/7 \
	"$T/acs/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:02.0/0000:15:00.0/iommu_group"
echo DMA-FQ >"$T/acs/sys/kernel/iommu_groups/7/type"
doc --root "$T/acs" --only iommu
status iommu WARN "IOMMU translating the NIC's DMA"
rc 1 "IOMMU DMA-FQ"
echo identity >"$T/acs/sys/kernel/iommu_groups/7/type"
doc --root "$T/acs" --only iommu
status iommu PASS "IOMMU passthrough"
rc 0 "IOMMU identity"

# BRAID_FSROOT is the default root
BRAID_FSROOT=$HOSTS/memlock-64k doc --only memlock
status memlock FAIL "BRAID_FSROOT as the root"
finish
