#!/usr/bin/env bash
# GPUDirect as NCCL's own IB transport advertises it, over softverbs, with hosts described
# by BRAID_FSROOT trees made here:
#   ptrSupport = HOST, | CUDA where peer memory is loaded (nv_mem, nv_mem_nc or
#   nvidia_peermem version file), | DMABUF where the fd -1 dma-buf probe says "supported"
#   (SOFTVERBS_DMABUF=1). NCCL uses GPUDirect when CUDA is set, or DMABUF is set and its
#   own dma-buf use is on (NCCL_DMABUF_ENABLE, default on, and a CUDA driver 11.7+ with
#   dma-buf support: the CUDA stand-in of tests/cuda plays one with and without).
# For every peermem x dma-buf x NCCL_DMABUF_ENABLE x (GPUs / no GPUs in the topology):
# the bits, one init WARN exactly when GPUs are present and NCCL will not use GPUDirect
# (with the reason), the fallback record (gpudirect fields; the backend's own reason kept
# next to the core's choice), and regMr(NCCL_PTR_CUDA): refused with one WARN naming the
# device and nvidia_peermem when there is no peer memory, registered when there is.
set -u
. "$(dirname "$0")/lib.sh"
PROBE=$BUILD/tests/ib/gdr-probe
need "$PROBE"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
unset NCCL_DMABUF_ENABLE CUDA_STANDIN_DMABUF CUDA_STANDIN_DRIVER_VERSION
CUDA_DIR=$(cd "$BUILD/tests/cuda" 2>/dev/null && pwd) || die "$BUILD/tests/cuda is missing: run make first"
DRIVER= # "": no CUDA driver (CI, this machine); ok, nodmabuf, old: the stand-in
GPU_XML=$CONF_DIR/../topo/hwloc-2socket-3gpu-mlx5.xml NOGPU_XML=$CONF_DIR/../topo/no-gpu.xml
ROOTS=$SV_FABRIC.roots out=$SV_FABRIC.out err=$SV_FABRIC.err
IB_CLEANUP+=('rm -rf "$ROOTS" "$out" "$err"')

host() { # NAME [FILE...]: a host root with these files
	local r=$ROOTS/$1 f
	shift
	mkdir -p "$r"
	for f in "$@"; do mkdir -p "$r/$(dirname "$f")"; echo 1 >"$r/$f"; done
}
host none
host peermem sys/module/nvidia_peermem/version
host nv_mem sys/kernel/mm/memory_peers/nv_mem/version
host nv_mem_nc sys/kernel/mm/memory_peers/nv_mem_nc/version
# NCCL looks for the version file: a module directory alone is not peer memory.
mkdir -p "$ROOTS/moddir/sys/module/nvidia_peermem"

fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
val() { sed -n "s/^$1=//p" "$out"; }
gdr_warns() { grep -c 'WARN.*GPUDirect RDMA' "$err"; }

# run ROOT DMABUF(0|1) NCCL_DMABUF_ENABLE(""=unset|0|1) XML PEERMEM(0|1)
run() {
	local root=$1 dmabuf=$2 enable=$3 xml=$4 peermem=$5 gpus=0 want=1 gdr=0 mode=none
	[ "$xml" = "$GPU_XML" ] && gpus=1
	local label="root=$root dmabuf=$dmabuf NCCL_DMABUF_ENABLE=${enable:-unset} gpus=$gpus"
	label+=" CUDA driver=${DRIVER:-none}"
	echo "== $label"
	rm -rf "${SV_FABRIC:?}"/*
	(
		[ -n "$enable" ] && export NCCL_DMABUF_ENABLE=$enable
		case $DRIVER in # the CUDA stand-in (tests/cuda), as a driver with and without dma-buf
		ok) export LD_LIBRARY_PATH=$CUDA_DIR:$LD_LIBRARY_PATH ;;
		nodmabuf) export LD_LIBRARY_PATH=$CUDA_DIR:$LD_LIBRARY_PATH CUDA_STANDIN_DMABUF=0 ;;
		old) export LD_LIBRARY_PATH=$CUDA_DIR:$LD_LIBRARY_PATH CUDA_STANDIN_DRIVER_VERSION=11060 ;;
		esac
		BRAID_FSROOT=$ROOTS/$root SOFTVERBS_DMABUF=$dmabuf HWLOC_XMLFILE=$xml \
			timeout 60 "$PROBE" "$PLUGIN_SO" 11 >"$out" 2>"$err"
	) || { cat "$out" "$err"; bad "gdr-probe failed"; return; }
	sed 's/^/  /' "$out"
	grep 'WARN' "$err" | sed 's/^/  /'
	[ "$peermem" = 1 ] && want=$((want | 2))
	[ "$dmabuf" = 1 ] && want=$((want | 4))
	# NCCL: GPUDirect = (ptrSupport & CUDA) || (dmaBufSupport && (ptrSupport & DMABUF))
	# ... and NCCL's core uses dma-buf only with a CUDA driver 11.7+ whose GPU says
	# CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (init.cc dmaBufSupported; DRIVER below)
	if [ "$dmabuf" = 1 ] && [ "${enable:-1}" != 0 ] && [ "$DRIVER" != nodmabuf ] &&
		[ "$DRIVER" != old ]; then
		gdr=1 mode=dma-buf
	elif [ "$peermem" = 1 ]; then
		gdr=1 mode=peermem
	fi
	[ "$(val ptr_support | cut -d' ' -f1)" = "$(printf '0x%x' $want)" ] ||
		bad "ptrSupport $(val ptr_support), want $(printf '0x%x' $want) (NCCL's IB transport)"
	[ "$(val fb_gpudirect)" = "$gdr" ] || bad "fallback gpudirect $(val fb_gpudirect), want $gdr"
	[ "$(val fb_gpudirect_mode)" = "$mode" ] ||
		bad "fallback gpudirect_mode '$(val fb_gpudirect_mode)', want '$mode'"
	[ -n "$(val fb_gpudirect_why)" ] || bad "fallback gpudirect_why is empty"
	# The backend's reason (net_ib's record) survives the core's record of its choice.
	val fb_why | grep -q 'verbs: 1 active port(s): svroce0:1' ||
		bad "fallback why '$(val fb_why)' lost net_ib's reason"
	val fb_why | grep -q 'first choice' || bad "fallback why '$(val fb_why)' lost the core's choice"
	if [ $gpus = 1 ] && [ $gdr = 0 ]; then
		[ "$(gdr_warns)" = 1 ] || bad "want one GPUDirect WARN at init, got $(gdr_warns)"
		[ "$(val init_warns)" = 1 ] || bad "init logged $(val init_warns) WARNs, want 1"
		if [ "$dmabuf" = 1 ] && [ "${enable:-1}" != 0 ]; then
			grep 'WARN.*GPUDirect RDMA' "$err" | grep -q 'CUDA driver' ||
				bad "the WARN does not name the CUDA driver"
		elif [ "$dmabuf" = 1 ]; then
			grep 'WARN.*GPUDirect RDMA' "$err" | grep -q 'NCCL_DMABUF_ENABLE=0' ||
				bad "the WARN does not name NCCL_DMABUF_ENABLE=0"
		else
			grep 'WARN.*GPUDirect RDMA' "$err" | grep 'nvidia_peermem' | grep -q 'dma-buf' ||
				bad "the WARN does not name nvidia_peermem and dma-buf"
		fi
	else
		[ "$(val init_warns)" = 0 ] || bad "init logged $(val init_warns) WARNs, want none"
	fi
	# The contract NCCL relies on: the CUDA bit exactly where regMr(NCCL_PTR_CUDA) works.
	local has_cuda=0 reg_ok=0
	case "$(val ptr_support)" in *CUDA*) has_cuda=1 ;; esac
	[ "$(val regmr_cuda)" = ncclSuccess ] && reg_ok=1
	[ $has_cuda = $reg_ok ] ||
		bad "ptrSupport $(val ptr_support) but regMr(NCCL_PTR_CUDA) gives $(val regmr_cuda)"
	if [ "$peermem" = 1 ]; then
		[ "$(val regmr_cuda)" = ncclSuccess ] || bad "regMr(CUDA) with peer memory: $(val regmr_cuda)"
		[ "$(val regmr_warns)" = 0 ] || bad "regMr(CUDA) with peer memory logged a WARN"
	else
		[ "$(val regmr_cuda)" = ncclInvalidUsage ] ||
			bad "regMr(CUDA) without peer memory: $(val regmr_cuda), want ncclInvalidUsage"
		[ "$(val regmr_warns)" = 1 ] || bad "regMr(CUDA) logged $(val regmr_warns) WARNs, want 1"
		grep 'WARN.*regMr' "$err" | grep 'svroce0' | grep -q 'nvidia_peermem' ||
			bad "the regMr WARN does not name the device and nvidia_peermem"
	fi
}

for xml in "$GPU_XML" "$NOGPU_XML"; do
	for root in none peermem; do
		peermem=0
		[ $root = peermem ] && peermem=1
		for dmabuf in 0 1; do
			for enable in "" 0; do
				run $root $dmabuf "$enable" "$xml" $peermem
			done
		done
	done
done
# A CUDA driver (the stand-in) with dma-buf, without it, and too old (11.6) for NCCL's use.
for DRIVER in ok nodmabuf old; do
	for root in none peermem; do
		peermem=0
		[ $root = peermem ] && peermem=1
		run $root 1 "" "$GPU_XML" $peermem
		run $root 0 "" "$GPU_XML" $peermem
	done
done
DRIVER=
# NCCL's other peer-memory files, and what is not one.
run nv_mem 0 "" "$GPU_XML" 1
run nv_mem_nc 0 "" "$GPU_XML" 1
run moddir 0 "" "$GPU_XML" 0
# NCCL_DMABUF_ENABLE=1 is the default's value.
run none 1 1 "$GPU_XML" 0

# Offered is not used: NCCL decides per GPU and NIC, and where it judges them too far
# apart (NCCL_NET_GDR_LEVEL) it registers host memory alone and copies every message
# through it, which braid's summary called "GPUDirect RDMA on" (seen on a GPU host:
# docs/benchmarks.md). A receive comm's registrations, as NCCL makes a connection's: one
# WARN once three are of host memory and none of GPU memory, while GPUDirect is offered.
hostwarns() { grep -c 'WARN.*NCCL receives into host memory' "$err"; }
regs() { # SEQ ROOT WANT: gdr-probe registers SEQ (H host, C GPU) on its receive comm
	echo "== receive registrations $1, root=$2: want $3 WARN(s)"
	rm -rf "${SV_FABRIC:?}"/*
	BRAID_FSROOT=$ROOTS/$2 HWLOC_XMLFILE=$GPU_XML GDR_PROBE_RECV_REGS=$1 \
		timeout 60 "$PROBE" "$PLUGIN_SO" 11 >"$out" 2>"$err" ||
		{ cat "$out" "$err"; bad "gdr-probe failed"; return; }
	grep 'WARN.*NCCL receives' "$err" | sed 's/^/  /'
	[ "$(hostwarns)" = "$3" ] || bad "registrations $1 on root $2: $(hostwarns) WARN(s), want $3"
	# braid stat's record of them (the last fb_ lines: read after the registrations)
	local g h
	g=$(sed -n 's/^fb_recv_regs_gpu=//p' "$out" | tail -n 1)
	h=$(sed -n 's/^fb_recv_regs_host=//p' "$out" | tail -n 1)
	[ "$g" = "$(printf %s "$1" | tr -cd C | wc -c)" ] && [ "$h" = "$(printf %s "$1" | tr -cd H | wc -c)" ] ||
		bad "registrations $1: the counters say $g in GPU memory, $h in host memory"
	[ "$3" = 0 ] || grep 'WARN.*NCCL receives' "$err" | grep -q 'NCCL_NET_GDR_LEVEL' ||
		bad "the WARN does not name NCCL_NET_GDR_LEVEL"
}
regs HHH peermem 1
regs HHHHHHHHH peermem 1 # once
regs HHCHHH peermem 0    # a GPU buffer: NCCL uses it
regs HH peermem 0        # not yet a connection's worth
regs HHH none 0          # not offered: init's WARN says so already

[ $fails = 0 ] || die "$fails check(s) failed"
echo "gpudirect: every combination as NCCL's IB transport"
