#!/usr/bin/env bash
# NCCL_IB_DATA_DIRECT means under braid what it means in NCCL's IB transport (init.cc,
# reg.cc): on an mlx5 device whose libmlx5 (MLX5_1.25) names a data-direct sysfs path and
# whose dma-buf probe through mlx5dv_reg_dmabuf_mr succeeds, the port is offered as
# <device>_dma, at that PCI path ("/sys" + it), with forceFlush set; dma-buf memory on it
# is registered with mlx5dv_reg_dmabuf_mr(MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT). 1 (the
# default): that device in place of the port; 2: both; 0: the port alone. A device without
# a data-direct path, a libmlx5 without MLX5_1.25 or no dma-buf: the port alone.
# libmlx5 is tests/ib/mlx5_standin.c over softverbs (two RoCE devices, svroce0 with a
# data-direct path); gdr-probe lists what NCCL would see, gdr-xfer moves and checks bytes
# through a dma-buf registration (tests/cuda's stand-in driver).
set -u
. "$(dirname "$0")/lib.sh"
PROBE=$BUILD/tests/ib/gdr-probe XFER=$BUILD/tests/cuda/gdr-xfer
MLX5_DIR=$(cd "$BUILD/tests/ib/mlx5" 2>/dev/null && pwd) || die "$BUILD/tests/ib/mlx5 is missing: run make first"
CUDA_DIR=$(cd "$BUILD/tests/cuda" 2>/dev/null && pwd) || die "$BUILD/tests/cuda is missing: run make first"
need "$PROBE" "$XFER"
export SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA==svroce0,svroce1
export BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
DD=/devices/pci0000:40/0000:40:01.1/0000:42:00.0
export MLX5_STANDIN_DD=svroce0=$DD
unset NCCL_IB_DATA_DIRECT BRAID_IB_DATA_DIRECT NCCL_DMABUF_ENABLE NCCL_GDR_FLUSH_DISABLE
out=$SV_FABRIC.out err=$SV_FABRIC.err reglog=$SV_FABRIC.reg root=$SV_FABRIC.root
IB_CLEANUP+=('rm -rf "$out" "$err" "$reglog" "$root"')
mkdir -p "$root"
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }

probe() { # LIBPATH, then VAR=VALUE...: the devices NCCL would see, as "name force_flush pci"
	local libs=$1
	shift
	rm -rf "${SV_FABRIC:?}"/*
	env LD_LIBRARY_PATH="$libs" SOFTVERBS_DMABUF=1 "$@" timeout 60 "$PROBE" "$PLUGIN_SO" \
		>"$out" 2>"$err" || { tail -n 20 "$err"; die "gdr-probe failed ($*)"; }
	sed -n -E 's/^dev[0-9]+=([^ ]+) force_flush=([0-9]) pci=(.*)/\1 \2 \3/p' "$out" | sort
}

want() { # WHAT EXPECTED(lines "name force_flush pci") GOT
	if [ "$2" != "$3" ]; then
		bad "$1"
		echo "    want: $(echo "$2" | paste -sd '|')"
		echo "    got:  $(echo "$3" | paste -sd '|')"
	fi
}

with=$MLX5_DIR:$LD_LIBRARY_PATH
pci1=$(probe "$LD_LIBRARY_PATH" NCCL_IB_DATA_DIRECT=0 | awk '$1 == "svroce1" { print $3 }')
pci0=$(probe "$LD_LIBRARY_PATH" NCCL_IB_DATA_DIRECT=0 | awk '$1 == "svroce0" { print $3 }')

echo "== default (1): svroce0 is offered as svroce0_dma, at its data-direct path, forceFlush 1"
got=$(probe "$with")
echo "$got" | sed 's/^/  /'
want "NCCL_IB_DATA_DIRECT unset" "$(printf 'svroce0_dma 1 /sys%s\nsvroce1 0 %s' "$DD" "$pci1")" "$got"
grep -q "ib: svroce0: data-direct DMA through /sys$DD" "$err" || bad "no INFO naming the path"

echo "== NCCL_IB_DATA_DIRECT=2: both"
got=$(probe "$with" NCCL_IB_DATA_DIRECT=2)
echo "$got" | sed 's/^/  /'
want "NCCL_IB_DATA_DIRECT=2" \
	"$(printf 'svroce0 0 %s\nsvroce0_dma 1 /sys%s\nsvroce1 0 %s' "$pci0" "$DD" "$pci1")" "$got"

echo "== NCCL_IB_DATA_DIRECT=0: the ports alone"
got=$(probe "$with" NCCL_IB_DATA_DIRECT=0)
want "NCCL_IB_DATA_DIRECT=0" "$(printf 'svroce0 0 %s\nsvroce1 0 %s' "$pci0" "$pci1")" "$got"

echo "== no dma-buf on the device (the probe says EOPNOTSUPP): the ports alone"
got=$(probe "$with" SOFTVERBS_DMABUF=0)
want "without dma-buf" "$(printf 'svroce0 0 %s\nsvroce1 0 %s' "$pci0" "$pci1")" "$got"

echo "== no libmlx5 of MLX5_1.25 (this host's, or none): the ports alone, with an INFO"
got=$(probe "$LD_LIBRARY_PATH")
want "without the stand-in" "$(printf 'svroce0 0 %s\nsvroce1 0 %s' "$pci0" "$pci1")" "$got"
grep -q 'ib: no data direct' "$err" || bad "no INFO saying why there is no data direct"

# Bytes through a dma-buf registration on svroce0_dma, and on svroce0 without data direct.
xfer() { # EXPECTED-data_direct-LINES, then VAR=VALUE...
	local n=$1
	shift
	rm -rf "${SV_FABRIC:?}"/* "$reglog"
	env LD_LIBRARY_PATH="$CUDA_DIR:$with" BRAID_IB_HCA==svroce0 BRAID_FSROOT="$root" \
		SOFTVERBS_DMABUF=1 MLX5_STANDIN_LOG="$reglog" "$@" timeout 120 "$XFER" "$PLUGIN_SO" \
		dmabuf >"$out" 2>"$err" || { tail -n 20 "$err"; bad "gdr-xfer failed ($*)"; return; }
	grep -q '^bytes_ok=1$' "$out" || bad "bytes differ ($*)"
	touch "$reglog"
	[ "$(grep -c 'data_direct=1 .* ok=1' "$reglog")" = "$n" ] ||
		bad "$(grep -c 'data_direct=1 .* ok=1' "$reglog") data-direct registrations, want $n ($*)"
	grep -q 'ok=0' "$reglog" && bad "a registration failed ($*)"
	grep -q 'ib: device 0 = svroce0_dma:1' "$err" || [ "$n" = 0 ] || bad "device 0 is not svroce0_dma"
}
echo "== gdr-xfer, dma-buf memory on svroce0_dma: registered for data direct, every byte right"
xfer 2 # one registration in each of the two processes
echo "== gdr-xfer, NCCL_IB_DATA_DIRECT=0: ibv_reg_dmabuf_mr, not libmlx5"
xfer 0 NCCL_IB_DATA_DIRECT=0

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: NCCL_IB_DATA_DIRECT as in NCCL"
