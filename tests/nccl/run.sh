#!/usr/bin/env bash
# NCCL end to end on one GPU: two ranks that look like two hosts (different NCCL_HOSTID)
# all-reduce through braid's net_ofi (libfabric tcp;ofi_rxm), through braid's net_ib on
# softverbs (one NIC, then two fused) when the build has softverbs, then through NCCL's
# own Socket transport; results verified, bus bandwidths side by side, and each braid
# run's NCCL log must show "Using network braid". Exits 77 (skipped, the reason on the
# last line) when there is no GPU, when $CUDA_HOME has no CUDA or NCCL, or on a sanitizer
# build (NCCL is not built with ASan and cannot load an ASan plugin).
# Usage (repo root): make nccl-test   or   BUILD=build tests/nccl/run.sh [--min B --max B]
# (make test runs it too: tests/run-tests.sh lists it as PASS, FAIL or SKIP with the reason)
# KEEP=DIR keeps every run's output and NCCL log in DIR; PAIR_TIMEOUT=S bounds each rank (300 s).
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
	# pids are the timeout wrappers: their rank (the child) first, or it runs on
	# orphaned and holds the GPU
	for p in "${pids[@]+"${pids[@]}"}"; do
		pkill -KILL -P "$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
	done
	[ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$tmp"/*.out "$tmp"/*.log "$tmp"/*.err "$KEEP"/; } 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# run_pair NAME ENV...: both ranks of $bin (PAIR_BIN, with PAIR_ARGS, when set) with ENV,
# rank 0's table in $tmp/NAME.out
run_pair() {
	local name=$1 rc=0
	shift
	pids=()
	for r in 0 1; do
		# NCCL writes its log to stdout unless NCCL_DEBUG_FILE names a file: the
		# table alone goes to NAME.R.out, NCCL's log to NAME.R.log, stderr to .err
		env "$@" NCCL_HOSTID="braid-test-host-$r" NCCL_MNNVL_ENABLE=0 \
			NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME="$IFACE" \
			NCCL_DEBUG_FILE="$tmp/$name.$r.log" \
			timeout --kill-after=10 "${PAIR_TIMEOUT:-300}" "${PAIR_BIN:-$bin}" --rank $r \
			--nranks 2 --id-file "$tmp/$name.id" \
			"${PAIR_ARGS[@]+"${PAIR_ARGS[@]}"}" \
			>"$tmp/$name.$r.out" 2>"$tmp/$name.$r.err" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	pids=()
	if [ "$rc" -eq 77 ]; then
		skip "$(tail -n 1 "$tmp/$name.0.out" | sed 's/^SKIP: //')"
	fi
	if [ "$rc" -ne 0 ]; then
		for r in 0 1; do
			echo "---- $name rank $r: NCCL log, stderr (last lines)"
			tail -n 30 "$tmp/$name.$r.log" "$tmp/$name.$r.err"
		done
		cat "$tmp/$name.0.out"
		die "$(basename "${PAIR_BIN:-$bin}") through $name failed (exit $rc)"
	fi
	cp "$tmp/$name.0.out" "$tmp/$name.out"
}

PAIR_ARGS=("$@")
echo "== through braid ($so, BRAID_OFI_PROVIDER=$PROVIDER)"
run_pair braid NCCL_NET=braid NCCL_NET_PLUGIN="$so" BRAID_BACKEND=ofi \
	BRAID_OFI_PROVIDER="$PROVIDER" BRAID_SOCKET_IFNAME="$IFACE" FI_TCP_IFACE="$IFACE"
cat "$tmp/braid.out"
for r in 0 1; do
	grep -q "Using network braid" "$tmp/braid.$r.log" ||
		die "rank $r: the NCCL log does not say \"Using network braid\" (see NCCL_DEBUG=INFO output)"
done
grep -h "Using network braid" "$tmp/braid.0.log" | head -n 1

# The ib backend on softverbs (the build's userspace RDMA device, first on the library
# path of these runs only): host memory, as on a host without GPUDirect RDMA.
sv=$(cd "$BUILD/softverbs" 2>/dev/null && pwd)
runs=(braid)
if [ -n "$sv" ] && [ -f "$sv/libibverbs.so.1" ]; then
	ib_env=(NCCL_NET=braid NCCL_NET_PLUGIN="$so" BRAID_BACKEND=ib BRAID_SOCKET_IFNAME="$IFACE"
		LD_LIBRARY_PATH="$sv:$LD_LIBRARY_PATH")
	echo "== through braid's ib backend on softverbs (svroce0)"
	mkdir -p "$tmp/sv-ib" "$tmp/sv-fused"
	run_pair ib "${ib_env[@]}" SOFTVERBS_FABRIC="$tmp/sv-ib" SOFTVERBS_DEVICES=svroce0:roce:1 \
		BRAID_IB_HCA==svroce0
	cat "$tmp/ib.out"
	echo "== through braid's ib backend on softverbs, svroce0+svroce1 fused"
	run_pair fused "${ib_env[@]}" SOFTVERBS_FABRIC="$tmp/sv-fused" \
		SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA==svroce0,svroce1 \
		BRAID_MERGE=svroce0+svroce1
	cat "$tmp/fused.out"
	for n in ib fused; do
		for r in 0 1; do
			grep -q "Using network braid" "$tmp/$n.$r.log" ||
				die "$n rank $r: the NCCL log does not say \"Using network braid\""
		done
	done
	runs+=(ib fused)
else
	echo "note: no $BUILD/softverbs/libibverbs.so.1: the ib backend is not run"
fi

echo "== through NCCL's Socket transport (no plugin)"
run_pair socket NCCL_NET=Socket NCCL_NET_PLUGIN=none
cat "$tmp/socket.out"
grep -q "Using network Socket" "$tmp/socket.0.log" ||
	echo "note: the Socket run's log does not say \"Using network Socket\""
runs+=(socket)

echo "== bus bandwidth, GB/s (all-reduce, 2 ranks on one GPU; braid = net_ofi tcp)"
awk -v names="${runs[*]}" '
	FNR == 1 { f++ }
	!/^#/ { bw[f, $1] = $6; if (f == 1) sizes[++ns] = $1 }
	END {
		n = split(names, h, " ")
		printf "%13s", "bytes"
		for (i = 1; i <= n; i++) printf " %10s", h[i]
		printf "\n"
		for (j = 1; j <= ns; j++) {
			printf "%13d", sizes[j]
			for (i = 1; i <= n; i++) printf " %10.3f", bw[i, sizes[j]]
			printf "\n"
		}
	}' $(for n in "${runs[@]}"; do echo "$tmp/$n.out"; done)
for n in "${runs[@]}"; do
	grep -q WRONG "$tmp/$n.out" && die "an all-reduce result through $n was wrong"
done
echo "nccl: all-reduce verified through braid (${runs[*]})"

# ncclCommAbort with all-reduces in flight, each rank at its own moment, ten rounds, then a
# verified all-reduce on a new communicator (issue 19 item 5: NCCL's proxy deregisters and
# closes the plugin's comms with requests outstanding, the peer's still sending)
abort_bin=$BUILD/tests/nccl/nccl_abort
if [ -x "$abort_bin" ]; then
	PAIR_ARGS=() # its own defaults: 10 rounds of 8 x 8 MiB in flight
	for n in "${runs[@]}"; do
		[ "$n" = socket ] && continue
		case $n in
		braid) env_n=(NCCL_NET=braid NCCL_NET_PLUGIN="$so" BRAID_BACKEND=ofi
			BRAID_OFI_PROVIDER="$PROVIDER" BRAID_SOCKET_IFNAME="$IFACE" FI_TCP_IFACE="$IFACE") ;;
		ib) env_n=("${ib_env[@]}" SOFTVERBS_FABRIC="$tmp/sv-ib" SOFTVERBS_DEVICES=svroce0:roce:1
			BRAID_IB_HCA==svroce0) ;;
		fused) env_n=("${ib_env[@]}" SOFTVERBS_FABRIC="$tmp/sv-fused"
			SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA==svroce0,svroce1
			BRAID_MERGE=svroce0+svroce1) ;;
		esac
		echo "== ncclCommAbort with all-reduces in flight, through $n"
		# NCCL 2.28-2.29 unloads the plugin with its last communicator and clears the
		# plugin's name as it does, so the next init finds no plugin ("Failed to
		# initialize any NET plugin"; fixed in 2.30.3): a first reference keeps it
		PAIR_BIN=$abort_bin run_pair "abort-$n" "${env_n[@]}" NCCL_NET_PLUGIN_REF_COUNT=1
		cat "$tmp/abort-$n.out"
		grep -h "WARN" "$tmp/abort-$n.0.log" "$tmp/abort-$n.1.log" | grep -c "NET/braid" |
			sed 's/^/braid WARN lines in both ranks'"'"' NCCL logs: /'
	done
	echo "nccl: ncclCommAbort with requests in flight, then a new communicator, through braid"
else
	echo "note: no $abort_bin: the abort rounds are not run"
fi
