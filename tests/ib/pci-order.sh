#!/usr/bin/env bash
# NCCL_IB_DEVICE_PCI_ORDER (docs/ib.md): as NCCL's IB transport sorts its devices, braid
# numbers its verbs devices in PCI order (default 1), so device i is the same NIC on every
# node whatever order libibverbs lists them in; 0 keeps libibverbs' order. softverbs lists
# svroce2, svroce0, svroce1; the topology (tests/topo/8gpu-nic-per-pair.xml, its first
# three NICs renamed) puts them at PCI 0000:95, 0000:15 and 0000:35. `braid topo` shows
# the devices as the plugin gives them to NCCL.
set -u
. "$(dirname "$0")/lib.sh"
need "$BRAID"
xml=$SV_FABRIC.xml
IB_CLEANUP+=('rm -f "$xml"')
sed 's/"mlx5_0"/"svroce0"/; s/"mlx5_1"/"svroce1"/; s/"mlx5_2"/"svroce2"/' \
	"$(dirname "$0")/../topo/8gpu-nic-per-pair.xml" >"$xml"
export SOFTVERBS_DEVICES=svroce2:roce:1,svroce0:roce:1,svroce1:roce:1 BRAID_SOCKET_IFNAME=lo
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }

order() { # [VAR=VALUE...]: the plugin's device names, in its order, on one line
	env "$@" timeout 60 "$BRAID" topo --xml "$xml" 2>&1 |
		awk '/^NCCL devices/ { on = 1; next } on && /^  [0-9]+ / { printf "%s ", $2 }
		     on && /^$/ { exit }'
}

got=$(order)
echo "default:                     $got"
[ "$got" = "svroce0 svroce1 svroce2 " ] || bad "default: want PCI order svroce0 svroce1 svroce2"
got=$(order NCCL_IB_DEVICE_PCI_ORDER=0)
echo "NCCL_IB_DEVICE_PCI_ORDER=0:  $got"
[ "$got" = "svroce2 svroce0 svroce1 " ] || bad "=0: want libibverbs' order svroce2 svroce0 svroce1"
got=$(order BRAID_IB_DEVICE_PCI_ORDER=0 NCCL_IB_DEVICE_PCI_ORDER=1)
[ "$got" = "svroce2 svroce0 svroce1 " ] || bad "BRAID_IB_DEVICE_PCI_ORDER=0 must win over NCCL's"

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: devices in PCI order, as NCCL_IB_DEVICE_PCI_ORDER says"
