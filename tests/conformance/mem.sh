#!/usr/bin/env bash
# Memory per comm (issue 13): the mem scenario under the counting allocator
# (tests/conformance/memcount), on ofi tcp;ofi_rxm, ofi shm and ib on softverbs.
# CONF_MEM_COMMS comms per round (default 64), CONF_MANY_ROUNDS rounds (default 3).
set -u
here=$(dirname "$0")
. "$here/lib.sh"
is_san_build && skip "the counting allocator replaces malloc: not under ASan (run the plain build)"
so=$(cd "$BUILD/tests/conformance" 2>/dev/null && pwd)/libmemcount.so
[ -f "$so" ] || die "$so is missing: run make first"
fail=0 ran=0
for t in tcp:"$here/tcp.sh" shm:"$here/shm.sh" ib-softverbs:"$here/../ib/conformance-ib.sh"; do
	name=${t%%:*} script=${t#*:}
	out=$(LD_PRELOAD=$so "$script" --api 11 --scenario mem 2>&1)
	rc=$?
	echo "$out" | grep -E '\] (before|round|malloc_trim|FAIL)|^(PASS|FAIL)|SKIP' | sed "s/^/[$name] /"
	echo "[$name] exit $rc"
	[ "$rc" -eq 0 ] && ran=$((ran + 1))
	[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || { echo "$out" | tail -n 30; fail=1; }
done
[ "$fail" -eq 0 ] || die "memory per comm"
[ "$ran" -gt 0 ] || skip "no transport could run"
echo "mem: all passed"
