#!/usr/bin/env bash
# One-shot NCCL end to end run of braid on a GPU machine that has CUDA, a driver and NCCL
# but no libfabric/hwloc/rdma-core: everything else travels in .dev/, which
# tests/nccl/device/prep.sh fills, with a copy of this script (README.md beside it).
# Usage, from the repo root of the device machine's copy:  bash .dev/gpu-run.sh
# Writes to $OUT (default /tmp/gpu-run-out): gpu-run.log (all of this script's output),
# run.log (tests/nccl/run.sh's output), keep.tar.gz (every run's table, NCCL log, stderr,
# the smoke runs, MPS logs). Exit status: run.sh's (0 pass, 77 skip, else fail).
# Knobs (env): NCCL_LIB=/path/libnccl.so.2, CUDART_LIB=/path/libcudart.so.13 (skip the
# search), TOTAL_BUDGET=390 (s, the whole script, roughly), RUN_TIMEOUT=330 (s, run.sh at most),
# PAIR_TIMEOUT=120 (s, each rank pair in run.sh), USE_MPS=1 (0: never start MPS),
# RUN_ARGS (passed to run.sh, e.g. "--min 1024 --max 1048576"; run.sh default 1 KiB..64 MiB).
set -u

# .dev is copied to /tmp first: the binaries get their x bits even if the tree is read-only
DEV_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEV=/tmp/braid-dev
ROOT=$(pwd)
OUT=${OUT:-/tmp/gpu-run-out}
mkdir -p "$OUT"
T0=$(date +%s)
TOTAL_BUDGET=${TOTAL_BUDGET:-390}
RUN_TIMEOUT=${RUN_TIMEOUT:-330}
export PAIR_TIMEOUT=${PAIR_TIMEOUT:-120}
USE_MPS=${USE_MPS:-1}
RUN_ARGS=${RUN_ARGS:-}
CUDAHOME=/tmp/cudahome
BUILD=/tmp/braid-build
KEEP=/tmp/keep
SMOKE=/tmp/keep/smoke
MPS_ON=0
HAVE_GPU=0
CUDA_OK=0
ORIG_LD=${LD_LIBRARY_PATH:-}

elapsed() { echo $(($(date +%s) - T0)); }
step() { echo; echo "######## [$(elapsed)s] $*"; }
note() { echo "gpu-run: $*"; }

# nccl_version PATH: the version code ncclGetVersion returns (0 when it cannot be read)
nccl_version() {
	local v
	v=$("$DEV/bin/gpu-probe" nccl "$1" 2>&1 | sed -n 's/.*version=\([0-9][0-9]*\).*/\1/p')
	echo "${v:-0}"
}

# site-packages folders of every python3 found (pip's nvidia-* wheels live there)
py_sites() {
	local py
	for py in python3 python /usr/bin/python3 /opt/conda/bin/python3 /usr/local/bin/python3; do
		command -v "$py" >/dev/null 2>&1 || continue
		timeout 30 "$py" - <<'PY' 2>/dev/null
import site, sys
paths = []
try:
    paths += site.getsitepackages()
except Exception:
    pass
try:
    paths.append(site.getusersitepackages())
except Exception:
    pass
paths += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
for m in ("nvidia.nccl", "nvidia"):
    try:
        mod = __import__(m, fromlist=["_"])
        for p in list(getattr(mod, "__path__", [])):
            print("MOD " + p)
    except Exception:
        pass
for p in paths:
    print("SITE " + p)
PY
	done | awk '!seen[$0]++'
}

# candidates NAME: every path of NAME (libnccl.so.2 or libcudart.so.13) in the usual places
candidates() {
	local name=$1 d p
	{
		for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
			/usr/local/cuda-*/lib64 /usr/local/cuda-*/lib /usr/local/cuda-*/targets/x86_64-linux/lib \
			/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib /usr/local/nvidia/lib64 \
			/usr/local/nvidia/lib; do
			[ -e "$d/$name" ] && echo "$d/$name"
		done
		while read -r kind p; do
			case $kind in
			MOD)
				[ -e "$p/lib/$name" ] && echo "$p/lib/$name"
				for d in "$p"/*/lib; do [ -e "$d/$name" ] && echo "$d/$name"; done ;;
			SITE)
				for d in "$p"/nvidia/*/lib "$p"/nvidia/*/lib64 "$p"/torch/lib; do
					[ -e "$d/$name" ] && echo "$d/$name"
				done ;;
			esac
		done < <(py_sites)
		ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n { print $NF }'
	} | while read -r p; do [ -e "$p" ] && readlink -f "$p"; done | awk '!seen[$0]++'
}

# find_fallback NAME: a bounded search of the whole file system
find_fallback() {
	timeout 60 find / -maxdepth 10 \( -path /proc -o -path /sys -o -path /dev -o -path /run \
		-o -path "$CUDAHOME" -o -path "$ROOT" \) -prune -o -name "$1" -print 2>/dev/null |
		head -n 20
}

main() {
	step "host"
	date -u
	uname -a
	head -n 3 /etc/os-release
	echo "nproc $(nproc); $(free -g 2>/dev/null | awk '/^Mem:/ {print "mem " $2 " GiB"}'); ulimit -l $(ulimit -l); uid $(id -u)"
	df -h /dev/shm /tmp 2>/dev/null
	if nvidia-smi -L; then
		HAVE_GPU=1
		nvidia-smi --query-gpu=name,driver_version,compute_mode,memory.total,memory.used \
			--format=csv 2>&1
	else
		note "nvidia-smi -L failed (rc $?)"
		ls /dev/nvidia[0-9]* >/dev/null 2>&1 && HAVE_GPU=1
	fi
	ls -l /dev/nvidia* 2>&1 | head -n 8
	rm -rf "$DEV"
	cp -r "$DEV_SRC" "$DEV" || { note "cannot copy $DEV_SRC to $DEV"; exit 1; }
	chmod 755 "$DEV"/bin/* "$DEV"/lib/* "$DEV"/lib-tool/* "$DEV"/fallback/* "$DEV"/build/braid \
		"$DEV"/build/libnccl-net-braid.so "$DEV"/build/tests/nccl/nccl_allreduce \
		"$DEV"/build/softverbs/*
	echo "repo root $ROOT; .dev $DEV_SRC (copied to $DEV); OUT $OUT"
	echo "LD_LIBRARY_PATH at start: ${ORIG_LD:-(unset)}"
	step ".dev was built from"
	cat "$DEV/BUILT_FROM"
	awk '$1 == "sha256" { print $2, $3 }' "$DEV/BUILT_FROM" | while read -r sum f; do
		now=$(sha256sum "$ROOT/$f" 2>/dev/null | cut -d' ' -f1)
		if [ "$now" = "$sum" ]; then
			echo "same as the build: $f"
		else
			echo "WARNING: $f differs from the one .dev was built with (the binaries may be stale)"
		fi
	done
	if (cd "$DEV" && sha256sum --quiet -c SHA256SUMS); then
		echo ".dev files intact (SHA256SUMS)"
	else
		echo "WARNING: .dev files differ from SHA256SUMS"
	fi

	step "locate NCCL (libnccl.so.2)"
	local cands=() c v best="" bestv=-1
	if [ -n "${NCCL_LIB:-}" ]; then
		cands=("$NCCL_LIB")
	else
		mapfile -t cands < <(candidates libnccl.so.2)
		if [ ${#cands[@]} -eq 0 ]; then
			note "no libnccl.so.2 in the usual places: searching / (60 s at most)"
			mapfile -t cands < <(find_fallback 'libnccl.so.2*')
		fi
	fi
	local vs score bestscore=-1
	for c in "${cands[@]+"${cands[@]}"}"; do
		v=$(nccl_version "$c")
		vs=$(LC_ALL=C grep -a -m1 -oE 'NCCL version [0-9]+\.[0-9]+\.[0-9]+(\+cuda[0-9.]+)?' "$c" 2>/dev/null | tr -d '\0' | head -n 1)
		echo "  $c -> $(readlink -f "$c") version $v ($vs)"
		# a build for CUDA 13 first (nccl_allreduce uses cudart 13), then the highest version
		score=$v
		case $vs in *+cuda13*) score=$((v + 1000000)) ;; esac
		if [ "$v" -gt 0 ] && [ "$score" -gt "$bestscore" ]; then best=$c; bestv=$v; bestscore=$score; fi
	done
	if [ -z "$best" ] && [ ${#cands[@]} -gt 0 ]; then
		best=${cands[0]}
		note "no libnccl.so.2 answered ncclGetVersion: using $best anyway"
	fi
	if [ -z "$best" ]; then
		note "no libnccl.so.2 found anywhere: run.sh will skip"
	else
		echo "chosen NCCL: $best (version code $bestv; a +cuda13 build first, then the highest, then the first found)"
	fi
	local nccl=$best

	step "locate the CUDA runtime (libcudart.so.13)"
	cands=()
	if [ -n "${CUDART_LIB:-}" ]; then
		cands=("$CUDART_LIB")
	else
		mapfile -t cands < <(candidates libcudart.so.13)
		if [ ${#cands[@]} -eq 0 ]; then
			note "no libcudart.so.13 in the usual places: searching / (60 s at most)"
			mapfile -t cands < <(find_fallback 'libcudart.so.13*')
		fi
		cands+=("$DEV/fallback/libcudart.so.13")
	fi
	local cudart="" first=""
	for c in "${cands[@]}"; do
		[ -e "$c" ] || continue
		[ -n "$first" ] || first=$c
		echo "  $c -> $(readlink -f "$c")"
		if "$DEV/bin/gpu-probe" cuda "$c" 2>&1 | sed 's/^/    /'; [ "${PIPESTATUS[0]}" -eq 0 ]; then
			cudart=$c
			CUDA_OK=1
			break
		fi
	done
	if [ -z "$cudart" ]; then
		cudart=$first
		note "no libcudart.so.13 passed the probe (cudaGetDeviceCount + cudaMalloc); using ${cudart:-none}"
	fi
	echo "chosen CUDA runtime: ${cudart:-none}"

	step "CUDA_HOME shim $CUDAHOME"
	rm -rf "$CUDAHOME"
	mkdir -p "$CUDAHOME/include" "$CUDAHOME/lib64"
	cp "$DEV/include/nccl.h" "$DEV/include/cuda_runtime_api.h" "$CUDAHOME/include/"
	if [ -n "$nccl" ]; then
		ln -sf "$(readlink -f "$nccl")" "$CUDAHOME/lib64/libnccl.so.2"
		ln -sf "$(readlink -f "$nccl")" "$CUDAHOME/lib64/libnccl.so"
	fi
	if [ -n "$cudart" ]; then
		ln -sf "$(readlink -f "$cudart")" "$CUDAHOME/lib64/libcudart.so.13"
		ln -sf "$(readlink -f "$cudart")" "$CUDAHOME/lib64/libcudart.so"
	fi
	ls -l "$CUDAHOME"/include "$CUDAHOME"/lib64

	step "build layout $BUILD and library path"
	rm -rf "$BUILD"
	cp -r "$DEV/build" "$BUILD"
	chmod 755 "$BUILD"/tests/nccl/* 2>/dev/null
	chmod 755 "$BUILD/libnccl-net-braid.so" "$BUILD/braid" "$BUILD/tests/nccl/nccl_allreduce" \
		"$BUILD/softverbs/libibverbs.so.1" "$BUILD/softverbs/softverbs-stat"
	# .dev/lib (libfabric, which net_ofi dlopens as libfabric.so.1, its deps, hwloc, rdma-core's
	# libibverbs) before whatever the image had; run.sh puts $CUDA_HOME/lib64 first itself,
	# and $BUILD/softverbs first for its ib rows
	export LD_LIBRARY_PATH="$CUDAHOME/lib64:$DEV/lib${ORIG_LD:+:$ORIG_LD}"
	echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
	find "$BUILD" -type f | sort | xargs ls -l

	step "preflight: shared libraries (ldd)"
	local o miss=0
	for o in "$BUILD/libnccl-net-braid.so" "$BUILD/tests/nccl/nccl_allreduce" \
		"$DEV/lib/libfabric.so.1" "$DEV/lib/libibverbs.so.1" "$BUILD/softverbs/libibverbs.so.1" \
		"$DEV/bin/fi_info"; do
		echo "-- $o"
		ldd "$o" 2>&1 | sed 's/^/   /'
		if ldd "$o" 2>&1 | grep -q "not found"; then
			echo "   ^^^ NOT FOUND above"
			miss=1
		fi
	done
	if [ "$miss" -eq 0 ]; then echo "every library resolves"; else note "WARNING: some libraries are not found"; fi

	step "preflight: libfabric providers"
	timeout 20 "$DEV/bin/fi_info" --version 2>&1
	timeout 20 "$DEV/bin/fi_info" -l 2>&1 | grep -v '^ *version' | tr '\n' ' '
	echo
	FI_TCP_IFACE=lo timeout 20 "$DEV/bin/fi_info" -p 'tcp;ofi_rxm' -t FI_EP_RDM 2>&1 | head -n 12
	if command -v ip >/dev/null; then ip -brief addr | head -n 8; else head -n 8 /proc/net/dev; fi

	step "preflight: braid version / braid doctor"
	LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$DEV/lib-tool" timeout 20 "$BUILD/braid" version \
		"$BUILD/libnccl-net-braid.so" 2>&1
	LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$DEV/lib-tool" NCCL_NET_PLUGIN="$BUILD/libnccl-net-braid.so" \
		timeout 30 "$BUILD/braid" doctor 2>&1
	echo "(braid doctor rc $?)"

	rm -rf "$KEEP"
	mkdir -p "$SMOKE"
	if [ "$HAVE_GPU" -eq 1 ]; then
		step "CUDA MPS"
		export CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps CUDA_MPS_LOG_DIRECTORY=/tmp/nvidia-mps-log
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		if [ "$CUDA_OK" != 1 ]; then
			note "CUDA failed the probe without MPS: MPS not started"
		elif [ "$USE_MPS" != 1 ]; then
			note "USE_MPS=$USE_MPS: MPS not started (two ranks time-slice the GPU)"
		elif ! command -v nvidia-cuda-mps-control >/dev/null; then
			note "no nvidia-cuda-mps-control: MPS not started (two ranks time-slice the GPU)"
		elif nvidia-cuda-mps-control -d; then
			MPS_ON=1
			sleep 1
			echo "MPS control daemon started"
			if ! timeout 60 "$DEV/bin/gpu-probe" cuda "$CUDAHOME/lib64/libcudart.so.13"; then
				note "CUDA fails under MPS: stopping MPS"
				mps_stop
			fi
		else
			note "nvidia-cuda-mps-control -d failed (rc $?): MPS not started"
		fi

		step "smoke: 2 ranks, NCCL Socket, 1 KiB..64 KiB (MPS_ON=$MPS_ON)"
		if ! smoke s1 && [ "$MPS_ON" -eq 1 ]; then
			note "smoke failed under MPS: stopping MPS and trying again without it"
			mps_stop
			smoke s2 || note "smoke fails without MPS too: running run.sh anyway"
		fi
	else
		note "no GPU: no MPS, no smoke run"
	fi

	step "tests/nccl/run.sh"
	local left=$((TOTAL_BUDGET - $(elapsed) - 25))
	[ "$left" -lt "$RUN_TIMEOUT" ] && RUN_TIMEOUT=$left
	[ "$RUN_TIMEOUT" -lt 60 ] && RUN_TIMEOUT=60
	# shellcheck disable=SC2086
	echo "KEEP=$KEEP PAIR_TIMEOUT=$PAIR_TIMEOUT BUILD=$BUILD CUDA_HOME=$CUDAHOME" \
		"timeout $RUN_TIMEOUT bash tests/nccl/run.sh $RUN_ARGS (MPS_ON=$MPS_ON)"
	cd "$ROOT" || exit 1
	# braid stat --json every 0.3 s while the ranks run: what a fabric engineer would see
	(
		while :; do
			LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$DEV/lib-tool" timeout 5 "$BUILD/braid" stat --json 2>/dev/null |
				python3 -c 'import json,sys
d=json.load(sys.stdin)
for p in d.get("processes",[]):
    print(json.dumps({"pid":p.get("pid"),"backend":p.get("backend"),"provider":p.get("provider"),"gpudirect":p.get("gpudirect"),"devices":[(x.get("name"),x.get("tx_bytes")) for x in p.get("devices",[])]}))' 2>/dev/null
			sleep 0.3
		done
	) >"$OUT/stat.jsonl" &
	local watcher=$!
	# shellcheck disable=SC2086
	KEEP=$KEEP BUILD=$BUILD CUDA_HOME=$CUDAHOME timeout --kill-after=15 "$RUN_TIMEOUT" \
		bash tests/nccl/run.sh $RUN_ARGS 2>&1 | tee "$OUT/run.log"
	local rc=${PIPESTATUS[0]}
	kill "$watcher" 2>/dev/null
	wait "$watcher" 2>/dev/null
	echo "braid stat --json while the ranks ran: $(wc -l <"$OUT/stat.jsonl") process records"
	python3 -c 'import json,sys,collections
c=collections.Counter()
for line in open(sys.argv[1]):
    p=json.loads(line); g=p.get("gpudirect") or {}
    c[(p.get("backend"),g.get("on"),g.get("used"),g.get("recv_regs_gpu"),g.get("recv_regs_host"))]+=1
for k,v in sorted(c.items(), key=str): print(v, "x backend,on,used,regs_gpu,regs_host =", k)' "$OUT/stat.jsonl"
	reap run.sh
	MPS_RUN=$MPS_ON
	echo "run.sh rc $rc"
	[ "$rc" -eq 124 ] && note "run.sh ran past $RUN_TIMEOUT s and was stopped"

	step "after"
	ls -l "$KEEP" 2>&1 | head -n 40
	[ -d "${CUDA_MPS_LOG_DIRECTORY:-/nonexistent}" ] && cp -r "$CUDA_MPS_LOG_DIRECTORY" "$KEEP/mps-log" 2>/dev/null
	[ "$MPS_ON" -eq 1 ] && mps_stop
	tar -czf "$OUT/keep.tar.gz" -C "$(dirname "$KEEP")" "$(basename "$KEEP")" 2>&1
	if [ "$(stat -c %s "$OUT/keep.tar.gz" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
		note "keep.tar.gz is over 15 MiB: keeping the last 2000 lines of each file instead"
		rm -rf /tmp/keep-short
		mkdir -p /tmp/keep-short
		(cd "$KEEP" && find . -type f) | while read -r f; do
			mkdir -p "/tmp/keep-short/$(dirname "$f")"
			tail -n 2000 "$KEEP/$f" >"/tmp/keep-short/$f"
		done
		tar -czf "$OUT/keep.tar.gz" -C /tmp keep-short
	fi
	ls -l "$OUT"
	echo
	echo "======== gpu-run summary: run.sh rc $rc, $(elapsed) s, MPS_ON at the run: $MPS_RUN," \
		"NCCL $nccl ($bestv), cudart $cudart"
	grep -E '^(SKIP|FAIL|nccl: )' "$OUT/run.log" | tail -n 3
	return "$rc"
}

# reap WHAT: SIGKILL every process still running $BUILD's nccl_allreduce (run.sh's cleanup
# SIGKILLs the `timeout` wrappers of its ranks, which leaves the ranks themselves running)
reap() {
	local p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		if [ "$exe" = "$BUILD/tests/nccl/nccl_allreduce" ] || [ "$exe" = "$BUILD/tests/nccl/nccl_abort" ]; then
			echo "gpu-run: after $1: killing leftover rank, pid ${p#/proc/}"
			kill -KILL "${p#/proc/}" 2>/dev/null
		fi
	done
}

mps_stop() {
	echo quit | timeout 20 nvidia-cuda-mps-control
	echo "MPS quit (rc $?)"
	MPS_ON=0
	sleep 1
}

# smoke NAME: both ranks through NCCL's Socket transport, small sizes, under 60 s; logs in $SMOKE
smoke() {
	local name=$1 r rc=0 pids=()
	for r in 0 1; do
		LD_LIBRARY_PATH="$LD_LIBRARY_PATH" NCCL_NET=Socket NCCL_NET_PLUGIN=none \
			NCCL_HOSTID="braid-smoke-host-$r" NCCL_MNNVL_ENABLE=0 NCCL_DEBUG=INFO \
			NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME=lo \
			NCCL_DEBUG_FILE="$SMOKE/$name.$r.log" timeout --kill-after=5 60 \
			"$BUILD/tests/nccl/nccl_allreduce" --rank $r --nranks 2 \
			--id-file "$SMOKE/$name.id" --min 1024 --max 65536 --iters 2 \
			>"$SMOKE/$name.$r.out" 2>"$SMOKE/$name.$r.err" &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=$?; done
	reap "smoke $name"
	cat "$SMOKE/$name.0.out"
	if [ "$rc" -ne 0 ]; then
		for r in 0 1; do
			echo "---- smoke $name rank $r (rc $rc): NCCL log, stderr (last lines)"
			tail -n 15 "$SMOKE/$name.$r.log" "$SMOKE/$name.$r.err" 2>&1
		done
		return 1
	fi
	grep -h "NCCL version" "$SMOKE/$name.0.log" 2>/dev/null | head -n 1
	echo "smoke $name passed (MPS_ON=$MPS_ON)"
}

MPS_RUN=0
main "$@" 2>&1 | tee "$OUT/gpu-run.log"
exit "${PIPESTATUS[0]}"
