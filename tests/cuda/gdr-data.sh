#!/usr/bin/env bash
# GPUDirect data paths over softverbs with the CUDA stand-in (tests/cuda/libcuda.so.1),
# between two processes (gdr-xfer): regMr(NCCL_PTR_CUDA) on a host with peer memory,
# regMrDmaBuf of a dma-buf fd (softverbs maps the stand-in's memfd) and iflush; every byte
# checked. The flush READs counted in softverbs' stats must be what NCCL's IB transport
# would post (connect.cc, p2p.cc):
#   flushEnabled = (peer memory || dma-buf probe says supported) && !NCCL_GDR_FLUSH_DISABLE
#   iflush: one READ when flushEnabled and some size is non-zero (the last such), else none
# NCCL's core calls iflush only for GPU buffers it registered for GPUDirect (net.cc,
# useGdr && needFlush): for host memory braid posts no READ either.
set -u
. "$(dirname "$0")/../ib/lib.sh"
XFER=$BUILD/tests/cuda/gdr-xfer
need "$XFER"
CUDA_DIR=$(cd "$BUILD/tests/cuda" && pwd)
export LD_LIBRARY_PATH="$CUDA_DIR:$LD_LIBRARY_PATH"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
unset NCCL_DMABUF_ENABLE NCCL_GDR_FLUSH_DISABLE BRAID_IB_FLUSH
ROOTS=$SV_FABRIC.roots out=$SV_FABRIC.out err=$SV_FABRIC.err
IB_CLEANUP+=('rm -rf "$ROOTS" "$out" "$err"')
mkdir -p "$ROOTS/none" "$ROOTS/peermem/sys/module/nvidia_peermem"
echo 1 >"$ROOTS/peermem/sys/module/nvidia_peermem/version"

fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
val() { sed -n "s/^$1=//p" "$out"; }

# run MODE PEERMEM(0|1) DMABUF(0|1) FLUSH_DISABLE(""=unset|0|1)
run() {
	local mode=$1 peermem=$2 dmabuf=$3 fdis=$4 root=none enabled=0 want
	[ "$peermem" = 1 ] && root=peermem
	echo "== $mode peermem=$peermem dma-buf=$dmabuf NCCL_GDR_FLUSH_DISABLE=${fdis:-unset}"
	rm -rf "${SV_FABRIC:?}"/*
	(
		[ -n "$fdis" ] && export NCCL_GDR_FLUSH_DISABLE=$fdis
		BRAID_FSROOT=$ROOTS/$root SOFTVERBS_DMABUF=$dmabuf \
			timeout 120 "$XFER" "$PLUGIN_SO" "$mode" >"$out" 2>"$err"
	) || { sed 's/^/  /' "$out"; grep -v INFO "$err" | tail -n 20; bad "gdr-xfer failed"; return; }
	sed 's/^/  /' "$out"
	[ "$(val reg_recv)" = ncclSuccess ] || bad "receiver's registration: $(val reg_recv)"
	[ "$(val reg_send)" = ncclSuccess ] || bad "sender's registration: $(val reg_send)"
	[ "$(val bytes_ok)" = 1 ] || bad "bytes differ"
	# NCCL's flushEnabled, from its source (not braid's)
	if { [ "$peermem" = 1 ] || [ "$dmabuf" = 1 ]; } && [ "${fdis:-0}" = 0 ]; then
		enabled=1
	fi
	want=0
	[ $enabled = 1 ] && [ "$mode" != host ] && want=$(val nonzero_recvs)
	[ "$(val nonzero_recvs)" = 6 ] || bad "$(val nonzero_recvs) non-empty receives, want 6"
	# plus the grouped receive: one READ for sizes {3000, 0}
	local group=0
	[ $enabled = 1 ] && [ "$mode" != host ] && group=1
	[ "$(val group_flush_reads)" = "$group" ] ||
		bad "$(val group_flush_reads) flush READs for the grouped receive, want $group"
	want=$((want + group))
	[ "$(val flush_reads)" = "$want" ] ||
		bad "$(val flush_reads) flush READs on the wire, want $want (NCCL's IB transport)"
	[ "$(val flush_requests)" = "$want" ] ||
		bad "iflush returned $(val flush_requests) requests, want $want"
}

run cuda 1 0 ""
run cuda 1 1 ""
run cuda 1 0 1
run cuda 1 0 0
run dmabuf 0 1 ""
run dmabuf 1 1 ""
run dmabuf 0 1 1
run host 1 0 ""
run host 0 0 ""
run host 0 1 ""

# No peer memory: regMr(NCCL_PTR_CUDA) is refused, with one WARN (never a crash or a hang).
echo "== cuda peermem=0 dma-buf=0: refused"
rm -rf "${SV_FABRIC:?}"/*
BRAID_FSROOT=$ROOTS/none SOFTVERBS_DMABUF=0 timeout 120 "$XFER" "$PLUGIN_SO" cuda >"$out" 2>"$err" &&
	bad "gdr-xfer succeeded without peer memory"
[ "$(val reg_recv)" = ncclInvalidUsage ] || bad "regMr(CUDA) without peer memory: '$(val reg_recv)'"
grep -q 'WARN.*regMr(NCCL_PTR_CUDA).*nvidia_peermem' "$err" || bad "no WARN naming nvidia_peermem"

[ $fails = 0 ] || die "$fails check(s) failed"
echo "gdr-data: regMr(CUDA), regMrDmaBuf and iflush move every byte; flush READs as NCCL's"
