#!/usr/bin/env bash
# net_ofi and CUDA memory on this machine, with the CUDA stand-in loaded (so braid's FI_HMEM
# probe runs): Debian's libfabric 1.17 is built without CUDA, so shm reports FI_HMEM (for
# host memory) yet fails every FI_HMEM_CUDA registration, and tcp reports no FI_HMEM.
# ptrSupport must then stay HOST (the CUDA bit only where the registration works),
# regMr(NCCL_PTR_CUDA) is refused with one WARN, and host memory still moves every byte.
# The decisions themselves: tests/unit/test_ofi_hmem.c. Registering CUDA memory through a
# provider end to end needs a CUDA-enabled libfabric (EFA): not run here.
set -u
. "$(dirname "$0")/../conformance/lib.sh"
XFER=$BUILD/tests/cuda/gdr-xfer
need "$XFER"
CUDA_DIR=$(cd "$BUILD/tests/cuda" && pwd)
command -v fi_info >/dev/null && fi_info -p tcp >/dev/null 2>&1 || skip "libfabric's tcp provider is missing"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
export BRAID_BACKEND=ofi BRAID_SOCKET_IFNAME=lo NCCL_DEBUG=INFO
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }
val() { sed -n "s/^$1=//p" "$out"; }

for prov in tcp shm; do
	fi_info -p "$prov" >/dev/null 2>&1 || { echo "== $prov: not here, skipped"; continue; }
	echo "== $prov, CUDA memory"
	LD_LIBRARY_PATH=$CUDA_DIR BRAID_OFI_PROVIDER=$prov timeout 60 "$XFER" "$PLUGIN_SO" cuda \
		>"$out" 2>"$err" && bad "CUDA memory registered where no provider can"
	grep -E 'FI_HMEM' "$err" | sed 's/^/  /' | sort -u
	grep -q "ofi: .*FI_HMEM .*host memory only" "$err" || bad "no INFO about FI_HMEM"
	grep -q "GPUDirect for NCCL: off.*no FI_HMEM" "$err" || bad "GPUDirect not off, or no reason"
	[ "$(val reg_recv)" = ncclInvalidUsage ] || bad "regMr(CUDA): '$(val reg_recv)', want ncclInvalidUsage"
	[ "$(grep -c 'WARN.*regMr of CUDA memory' "$err")" = 2 ] ||
		bad "want one regMr WARN per process"
	echo "== $prov, host memory with the CUDA driver loaded"
	LD_LIBRARY_PATH=$CUDA_DIR BRAID_OFI_PROVIDER=$prov timeout 60 "$XFER" "$PLUGIN_SO" host \
		>"$out" 2>"$err" || { grep -v INFO "$err" | tail; bad "host memory transfer failed"; }
	[ "$(val bytes_ok)" = 1 ] || bad "bytes differ"
	[ "$(val flush_requests)" = 0 ] || bad "ofi flushed host memory"
done
[ $fails = 0 ] || die "$fails check(s) failed"
echo "ofi-hmem: no usable FI_HMEM here: HOST only, CUDA registration refused, host bytes intact"
