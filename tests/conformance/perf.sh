#!/usr/bin/env bash
# The braid command end to end: `braid version` lists the five exported versions, and
# `braid perf` (two local processes over tcp;ofi_rxm) runs on every API version with
# its data checks passing. A smoke test of the tool `make demo` runs, not a benchmark.
set -u
. "$(dirname "$0")/lib.sh"
braid=$BUILD/braid
[ -x "$braid" ] || die "$braid is missing: run make first"
fi_info -p tcp >/dev/null 2>&1 || skip "libfabric has no tcp provider (fi_info -p tcp)"
export FI_TCP_IFACE=lo BRAID_SOCKET_IFNAME=lo

out=$("$braid" version) || die "braid version failed: $out"
echo "$out"
for v in 8 9 10 11 12; do
	echo "$out" | grep -q "ncclNetPlugin_v$v  *name \"braid\"" ||
		die "braid version does not list ncclNetPlugin_v$v named braid"
done
"$braid" --help | grep -q '^  perf' || die "braid --help does not list perf"
"$braid" help perf | grep -q -- '--window' || die "braid help perf does not describe --window"

for api in 8 9 10 11 12; do
	echo "== braid perf --api $api"
	out=$(timeout 120 "$braid" perf --backend ofi --provider 'tcp;ofi_rxm' --api "$api" \
		--min 1 --max 4M --iters 20 --warmup 2 --lat-iters 100 2>&1)
	rc=$?
	echo "$out" | grep -v 'SLOW PATH'
	[ "$rc" -eq 0 ] || die "braid perf --api $api exited $rc"
	echo "$out" | grep -q '^# data check: every verified iteration was right' ||
		die "braid perf --api $api: no clean data check"
	rows=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && $NF == "ok"' | wc -l)
	[ "$rows" -eq 23 ] || die "braid perf --api $api: $rows verified rows, expected 23 (1 B .. 4 MiB)"
done
# a peer that never comes: a clear error within the bound, no hang
out=$(timeout 30 "$braid" perf --client 127.0.0.1 --port 1 --timeout 2 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q 'gave up after 2 s' ||
	die "braid perf --client to a closed port: expected a bounded, clear failure, got: $out"
echo "perf: all passed"
