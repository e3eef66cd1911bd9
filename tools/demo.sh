#!/usr/bin/env bash
# `make demo`'s run (BUILD in the environment): `braid perf` between two local processes
# over libfabric tcp;ofi_rxm, then `braid stat` of the sending process as last read while
# it ran. Its counters file goes away when it exits, so the listing is the last read that
# found it: the run's traffic, but for at most the last READ_EVERY seconds.
set -u
BUILD=${BUILD:-build}
braid=$BUILD/braid
READ_EVERY=0.2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== braid perf: two local processes over libfabric tcp;ofi_rxm"
"$braid" perf --backend ofi --provider 'tcp;ofi_rxm' &
perf=$!
reads=0
# Bounded by braid perf itself (its connect and phase timeouts end it).
while kill -0 "$perf" 2>/dev/null; do
	if "$braid" stat --pid "$perf" >"$tmp/read" 2>&1 && grep -q "^pid $perf " "$tmp/read"; then
		mv "$tmp/read" "$tmp/stat"
		reads=$((reads + 1))
	fi
	sleep "$READ_EVERY"
done
wait "$perf"
rc=$?
if [ -s "$tmp/stat" ]; then
	echo "== braid stat --pid $perf: the sending process, last read within ${READ_EVERY} s" \
		"of its end (read $reads times while it ran; docs/stat.md)"
	cat "$tmp/stat"
else
	echo "== braid stat: the run ended before its counters could be read"
fi
exit "$rc"
