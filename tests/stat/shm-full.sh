#!/usr/bin/env bash
# A /dev/shm with no room for the counters file (a container run with a small
# --shm-size): the plugin must say so and count in private memory. Before the fix the
# file was only ftruncate()d, mapped fine, and the first counter touched killed the
# process (NCCL's, in a job) with SIGBUS. braid perf runs in a private mount namespace
# whose /dev/shm is a 64 KiB tmpfs, and must move and verify its data.
set -u
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to mount a small tmpfs in a mount namespace"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
out=$T/perf
unshare -m bash -c 'mount -t tmpfs -o size=64k braid-test-shm /dev/shm || exit 99
	exec timeout 120 "$0" perf --backend ofi --provider "tcp;ofi_rxm" --max 64K' \
	"$BRAID" >"$out" 2>&1
rc=$?
[ $rc = 99 ] && skip "cannot mount a tmpfs on /dev/shm in a mount namespace here"
if [ $rc = 0 ]; then pass "braid perf exits 0"; else fail "braid perf exited $rc:"; show "$out"; fi
expect_not "$out" "signal 7|SIGBUS|Bus error" "no SIGBUS"
expect "$out" "NCCL WARN NET/braid : counters: no room for [0-9]+ KiB in /dev/shm/braid-[0-9]+: No space left on device; counting in private memory" \
	"one WARN names the full /dev/shm"
expect "$out" "^# data check: every verified iteration was right" "every byte verified"
finish
