#!/usr/bin/env bash
# NCCL end to end on one GPU: two ranks that look like two hosts (different NCCL_HOSTID)
# all-reduce through braid (NCCL_NET=braid, libfabric tcp;ofi_rxm), then through NCCL's
# own Socket transport; results verified, bus bandwidths side by side, and the NCCL log
# must show "Using network braid". Exits 77 (skipped, the reason on the last line) when
# there is no GPU, when $CUDA_HOME has no CUDA or NCCL, or on a sanitizer build (NCCL is
# not built with ASan and cannot load an ASan plugin).
# Usage (repo root): make nccl-test   or   BUILD=build tests/nccl/run.sh [--min B --max B]
# (make test runs it too: tests/run-tests.sh lists it as PASS, FAIL or SKIP with the reason)
set -u
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
IFACE=${IFACE:-lo}
PROVIDER=${PROVIDER:-tcp;ofi_rxm}
bin=$BUILD/tests/nccl/nccl_allreduce
so=$(cd "$BUILD" 2>/dev/null && pwd)/libnccl-net-braid.so

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1 && ! nvidia-smi -L >/dev/null 2>&1; then
	skip "no GPU on this machine (no /dev/nvidia*, nvidia-smi finds none)"
fi
for f in include/nccl.h include/cuda_runtime_api.h lib64/libnccl.so lib64/libcudart.so; do
	[ -e "$CUDA_HOME/$f" ] || skip "no $CUDA_HOME/$f: CUDA and NCCL are needed (CUDA_HOME=...)"
done
[ -f "$so" ] || die "$so is missing: run make first"
if readelf -d "$so" | grep -q 'libasan'; then
	skip "sanitizer build: NCCL cannot load an ASan plugin (make nccl-test runs the plain build)"
fi
[ -x "$bin" ] || die "$bin is missing: make builds it when $CUDA_HOME has CUDA and NCCL"
export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

tmp=$(mktemp -d /tmp/braid-nccl.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]+"${pids[@]}"}"; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# run_pair NAME ENV...: both ranks with ENV, rank 0's table in $tmp/NAME.out
run_pair() {
	local name=$1 rc=0
	shift
	pids=()
	for r in 0 1; do
		env "$@" NCCL_HOSTID="braid-test-host-$r" NCCL_MNNVL_ENABLE=0 \
			NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME="$IFACE" \
			timeout --kill-after=10 300 "$bin" --rank $r --nranks 2 \
			--id-file "$tmp/$name.id" "${ARGS[@]+"${ARGS[@]}"}" \
			>"$tmp/$name.$r.out" 2>"$tmp/$name.$r.log" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	pids=()
	if [ "$rc" -eq 77 ]; then
		skip "$(tail -n 1 "$tmp/$name.0.out" | sed 's/^SKIP: //')"
	fi
	if [ "$rc" -ne 0 ]; then
		echo "---- $name rank 0 log (last lines)"; tail -n 30 "$tmp/$name.0.log"
		echo "---- $name rank 1 log (last lines)"; tail -n 30 "$tmp/$name.1.log"
		cat "$tmp/$name.0.out"
		die "all-reduce through $name failed (exit $rc)"
	fi
	cp "$tmp/$name.0.out" "$tmp/$name.out"
}

ARGS=("$@")
echo "== through braid ($so, BRAID_OFI_PROVIDER=$PROVIDER)"
run_pair braid NCCL_NET=braid NCCL_NET_PLUGIN="$so" BRAID_BACKEND=ofi \
	BRAID_OFI_PROVIDER="$PROVIDER" BRAID_SOCKET_IFNAME="$IFACE" FI_TCP_IFACE="$IFACE"
cat "$tmp/braid.out"
for r in 0 1; do
	grep -q "Using network braid" "$tmp/braid.$r.log" ||
		die "rank $r: the NCCL log does not say \"Using network braid\" (see NCCL_DEBUG=INFO output)"
done
grep -h "Using network braid" "$tmp/braid.0.log" | head -n 1

echo "== through NCCL's Socket transport (no plugin)"
run_pair socket NCCL_NET=Socket NCCL_NET_PLUGIN=none
cat "$tmp/socket.out"
grep -q "Using network Socket" "$tmp/socket.0.log" ||
	echo "note: the Socket run's log does not say \"Using network Socket\""

echo "== bus bandwidth, GB/s (all-reduce, 2 ranks on one GPU)"
awk 'NR == FNR { if (!/^#/) sock[$1] = $6; next }
     FNR == 1 { printf "%13s %10s %10s %8s\n", "bytes", "braid", "Socket", "ratio" }
     !/^#/ { s = sock[$1]; printf "%13d %10.3f %10.3f %7.0f%%\n", $1, $6, s, (s > 0 ? 100 * $6 / s : 0) }' \
	"$tmp/socket.out" "$tmp/braid.out"
grep -q WRONG "$tmp/braid.out" "$tmp/socket.out" && die "an all-reduce result was wrong"
echo "nccl: all-reduce through braid verified"
