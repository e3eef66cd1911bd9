#!/usr/bin/env bash
# Instructions per message (issue 18, item 4): callgrind counts, a send plus its receive,
# for each case and size. One process holds both ends of one connection and streams
# messages through the plugin's exported ncclNet v8 API (tests/bench/ipm.c): 8 in flight,
# each send posted once its receive is posted, every byte compared.
#
# Per case and size, two runs under callgrind: N messages and M < N (each after the same
# warm-up). Counted from the end of set-up to the last message verified; close is not
# counted. Then
#   per message = (corrected(N) - corrected(M)) / (N - M)
#   corrected   = counted - idle calls x the idle cost of one call
# where the idle calls are the test() calls that answered not-done and the isend()/
# irecv() calls that answered a NULL request, and the idle cost is measured in the same
# run on a quiet connection: test() of a receive nothing is sent to (used for test() and
# irecv()), isend() with no receive posted (used for isend()).
# Columns: plugin = instructions in libnccl-net-braid.so itself; whole = the process
# (plugin, libfabric or libibverbs, libc, loader) without the client's own work and
# without softverbs (the emulated NIC, its libibverbs.so.1: its own instructions and
# those of every call it makes outside itself, in every thread); raw = whole with no idle correction; idle/msg =
# the idle calls per message; runs = pairs of runs. A case with (almost) no idle calls
# gives the same counts every run (libfabric tcp and shm here); one whose runs had idle
# calls for more than 1 % of their messages depends on how the emulator's threads were
# scheduled, so REPEAT pairs run and each column is their median. tests/bench/ipm_callgrind.py does the sums.
#
# Usage: tests/bench/ipm.sh [CASE...]   from the repository root, after make.
#   Cases: ofi-tcp ofi-shm ib-1qp ib-4qp ib-ib ofi-tcp-fused ib-fused (default: all);
#   ofi-tcp-fused needs root (a network namespace with a veth pair). aws-tcp: another
#   plugin (aws-ofi-nccl) on libfabric tcp, with PLUGIN and EXTRA_ENV set.
#   BUILD (build), PLUGIN (the plugin .so), SIZES ("8 1048576"), N8/M8 (2000/1000 for
#   8 B), NBIG/MBIG (400/200 for larger sizes), API (8), OUT ($BUILD/bench/ipm.txt),
#   PROFILER (0; 1: init gets a profiler callback that does nothing, as NCCL's when no
#   profiler wants the events, and BRAID_PROFILER=1: what braid's events cost; auto: the
#   same callback with braid's default, as under NCCL without NCCL_PROFILER_PLUGIN;
#   1 and auto need API 10 or above),
#   RUN_TIMEOUT (seconds per run, 240), REPEAT (3), EXTRA_ENV (NAME=VALUE words added
#   to every run: another plugin's settings). The caller's BRAID_*, NCCL_*, FI_* and SOFTVERBS_*
#   variables are cleared first, so that each case runs with only its own settings.
# Exit: 0 when every case ran, 1 when one failed (its row says FAIL; logs are kept).
set -u
BUILD=${BUILD:-build}
PLUGIN=${PLUGIN:-$BUILD/libnccl-net-braid.so}
SIZES=${SIZES:-8 1048576}
N8=${N8:-2000} M8=${M8:-1000}
NBIG=${NBIG:-400} MBIG=${MBIG:-200}
API=${API:-8}
PROFILER=${PROFILER:-0}
OUT=${OUT:-$BUILD/bench/ipm.txt}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
REPEAT=${REPEAT:-3}
EXTRA_ENV=${EXTRA_ENV:-}
for v in $(compgen -e); do
	case $v in BRAID_* | NCCL_* | FI_* | SOFTVERBS_*) unset "$v" ;; esac
done
ALL_CASES="ofi-tcp ofi-shm ib-1qp ib-4qp ib-ib ofi-tcp-fused ib-fused"
CASES=${*:-$ALL_CASES}
here=$(cd "$(dirname "$0")" && pwd)
ipm=$BUILD/tests/bench/ipm
sv=$BUILD/softverbs/libibverbs.so.1
for f in "$ipm" "$PLUGIN" "$sv"; do
	[ -e "$f" ] || { echo "ipm: $f is missing: run make first"; exit 1; }
done
command -v valgrind >/dev/null || { echo "ipm: valgrind is not installed (make deps)"; exit 1; }
command -v python3 >/dev/null || { echo "ipm: python3 is not installed"; exit 1; }
if ldd "$PLUGIN" 2>/dev/null | grep -q 'libasan\|libtsan'; then
	echo "ipm: $PLUGIN is a sanitizer build; callgrind needs the plain one (BUILD=build)"
	exit 1
fi
grep -q 'idle-rtest' "$ipm" ||
	{ echo "ipm: $ipm was built without valgrind's headers: make deps, then make again"; exit 1; }
ipm=$(cd "$(dirname "$ipm")" && pwd)/ipm
PLUGIN=$(cd "$(dirname "$PLUGIN")" && pwd)/$(basename "$PLUGIN")
sv_dir=$(cd "$(dirname "$sv")" && pwd)
mkdir -p "$(dirname "$OUT")"
logs=$(cd "$(dirname "$OUT")" && pwd)/ipm-logs
rm -rf "$logs"
mkdir -p "$logs"
ns=braid-ipm-$$
fab=$(mktemp -d /tmp/ipmsv.XXXXXX)
cleanup() {
	ip netns del "$ns" 2>/dev/null
	rm -rf "$fab"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The fused libfabric device: in a namespace of its own, the two ends of a veth pair, each
# with an address in a subnet of its own, fused with BRAID_MERGE. Both ends of the
# connection are in this one process, so each lane runs from its interface's address to
# itself (tests/conformance/netns-fused.sh joins two namespaces by two veth pairs).
netns_up() {
	[ "$(id -u)" -eq 0 ] || { echo "needs root for a network namespace"; return 1; }
	ip netns add "$ns" 2>/dev/null || { echo "ip netns add failed"; return 1; }
	ip -n "$ns" link set lo up || return 1
	ip -n "$ns" link add ipm1 type veth peer name ipm2 || { echo "no veth pair"; return 1; }
	for i in 1 2; do
		if ! ip -n "$ns" addr add "198.18.$i.1/24" dev "ipm$i" ||
			! ip -n "$ns" link set "ipm$i" up; then
			echo "cannot bring up ipm$i"
			return 1
		fi
	done
}

# case_env CASE: the environment (and namespace) of a case, as env(1) arguments
case_env() {
	local ofi=(BRAID_BACKEND=ofi BRAID_SOCKET_IFNAME=lo)
	local ib=(BRAID_BACKEND=ib BRAID_SOCKET_IFNAME=lo LD_LIBRARY_PATH="$sv_dir"
		SOFTVERBS_FABRIC="$fab")
	case $1 in
	ofi-tcp) echo "${ofi[@]}" "BRAID_OFI_PROVIDER=tcp;ofi_rxm" FI_TCP_IFACE=lo ;;
	ofi-shm) echo "${ofi[@]}" BRAID_OFI_PROVIDER=shm ;;
	ib-1qp) echo "${ib[@]}" SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 \
		BRAID_IB_QPS_PER_CONN=1 ;;
	# 4: the RoCE default (plugin/params.h), named so that a new default changes no row
	ib-4qp) echo "${ib[@]}" SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 \
		BRAID_IB_QPS_PER_CONN=4 ;;
	# An InfiniBand port with NCCL's defaults: 1 QP, adaptive routing above 8 KiB
	ib-ib) echo "${ib[@]}" SOFTVERBS_DEVICES=svib0:ib:1 BRAID_IB_HCA==svib0 ;;
	# Fused: the equal split. Adaptive weights follow the goodput measured while the
	# run is slowed down by callgrind and by the machine's load, and with them the
	# work requests per message (1 MiB on ib-fused, three runs: 3,556 to 6,334
	# plugin instructions a message).
	ofi-tcp-fused) echo BRAID_BACKEND=ofi BRAID_SOCKET_IFNAME==ipm1 \
		"BRAID_OFI_PROVIDER=tcp;ofi_rxm" BRAID_MERGE=ipm1+ipm2 BRAID_STRIPE=equal ;;
	ib-fused) echo "${ib[@]}" SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 \
		BRAID_IB_HCA==svroce0,svroce1 BRAID_MERGE=svroce0+svroce1 BRAID_IB_QPS_PER_CONN=4 \
		BRAID_STRIPE=equal ;;
	# Not in the default list: aws-ofi-nccl on tcp (PLUGIN=its .so, EXTRA_ENV=
	# LD_LIBRARY_PATH=<folder of the libcudart stand-in>; docs/benchmarks-ipm.md)
	aws-tcp) echo FI_PROVIDER=tcp NCCL_SOCKET_IFNAME=lo ;;
	*) return 1 ;;
	esac
}

# one CASE SIZE MSGS REP: one callgrind run; its files under $logs/CASE.SIZE.REP.MSGS*
one() {
	local tag=$logs/$1.$2.$4.$3 env pre=()
	env=$(case_env "$1") || return 1
	[ "$1" = ofi-tcp-fused ] && pre=(ip netns exec "$ns")
	[ "$PROFILER" = 1 ] && env="$env BRAID_PROFILER=1"
	# shellcheck disable=SC2086 # env is a list of NAME=VALUE words without spaces
	"${pre[@]}" env $env $EXTRA_ENV timeout "$RUN_TIMEOUT" valgrind --tool=callgrind \
		--instr-atstart=no --compress-strings=no --compress-pos=no \
		--callgrind-out-file="$tag.cg" "$ipm" --plugin "$PLUGIN" --api "$API" --size "$2" \
		--msgs "$3" --profiler "$(case $PROFILER in 0) echo 0 ;; 1) echo 1 ;; *) echo 2 ;; esac)" --timeout "$((RUN_TIMEOUT - 20))" >"$tag.out" 2>"$tag.err" &&
		grep -q '^ipm: ' "$tag.out" &&
		python3 "$here/ipm_callgrind.py" --plugin "$PLUGIN" --driver "$ipm" --exclude "$sv" \
			"$tag.cg" >"$tag.phases"
}

# pairs CASE SIZE N M: the row's columns, from one pair of runs, or from REPEAT pairs
# (median of each column) when the first pair had idle calls for > 1 % of its messages
pairs() {
	local runs=() k=1 out
	while :; do
		one "$1" "$2" "$3" "r$k" && one "$1" "$2" "$4" "r$k" || return 1
		runs+=("$logs/$1.$2.r$k.$3" "$logs/$1.$2.r$k.$4")
		out=$(python3 "$here/ipm_callgrind.py" --result "${runs[@]}") || return 1
		if [ "$k" -ge "$REPEAT" ] || [ "${out##* }" != 1 ]; then
			break
		fi
		k=$((k + 1))
	done
	echo "${out% *}"
}

fmt_row() { printf '%-14s %8s %10s %12s %12s %12s %9s %5s\n' "$@"; }
header() {
	echo "# instructions per message (callgrind), a send plus its receive, one process;"
	echo "# plugin $PLUGIN, ncclNet v$API, profiler callback $PROFILER, window 8; $(git -C "$here" describe --always --dirty 2>/dev/null || echo '?')"
	fmt_row "case" "size" "N-M" "plugin" "whole" "whole raw" "idle/msg" "runs"
}

rc=0
fused_ok=
{ header; } | tee "$OUT"
for c in $CASES; do
	case_env "$c" >/dev/null || { echo "ipm: unknown case '$c' (cases: $ALL_CASES aws-tcp)"; exit 1; }
	if [ "$c" = ofi-tcp-fused ] && [ -z "$fused_ok" ]; then
		if why=$(netns_up 2>&1); then fused_ok=1; else fused_ok=no; fi
	fi
	for s in $SIZES; do
		if [ "$s" -le 65536 ]; then n=$N8 m=$M8; else n=$NBIG m=$MBIG; fi
		if [ "$c" = ofi-tcp-fused ] && [ "$fused_ok" = no ]; then
			fmt_row "$c" "$s" "$n-$m" "SKIP" "" "" "" "" | tee -a "$OUT"
			echo "#   $c: $why" | tee -a "$OUT"
			continue
		fi
		row=$(pairs "$c" "$s" "$n" "$m") || row=FAIL
		if [ "$row" = FAIL ]; then
			rc=1
			fmt_row "$c" "$s" "$n-$m" "FAIL" "" "" "" "" | tee -a "$OUT"
			echo "#   logs: $logs/$c.$s.*" | tee -a "$OUT"
			for e in "$logs/$c.$s."*.err; do
				[ -f "$e" ] && grep -v '^==' "$e" | tail -2 | sed 's/^/#   /'
			done | tee -a "$OUT"
			continue
		fi
		# shellcheck disable=SC2086
		fmt_row "$c" "$s" "$n-$m" $row | tee -a "$OUT"
	done
done
exit $rc
