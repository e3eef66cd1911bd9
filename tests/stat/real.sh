#!/usr/bin/env bash
# braid stat on real braid processes: `braid perf` over libfabric's tcp;ofi_rxm (two local
# processes through the plugin, each with its /dev/shm/braid-<pid>): both listed as live
# with backend ofi and provider tcp;ofi_rxm, on a slow path and marked; the streaming
# side's send comm and device show its bytes, and --watch a rate; once perf is done its
# files are gone and braid stat lists neither.
set -u
. "$(dirname "$0")/lib.sh"
unset BRAID_SHM_DIR # the plugin writes /dev/shm/braid-<pid>
command -v fi_info >/dev/null && fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1 ||
	skip "libfabric's tcp;ofi_rxm provider is not usable here (fi_info -p 'tcp;ofi_rxm')"
[ -d /dev/shm ] && [ -w /dev/shm ] || skip "no writable /dev/shm"
out=$T/out

# 10 GB in 1 MiB messages: seconds on any machine, long enough to look at it
BRAID_SOCKET_IFNAME=lo "$BRAID" perf --backend ofi --provider 'tcp;ofi_rxm' --bw-only \
	--min 1M --max 1M --iters 10000 --warmup 2 >"$T/perf" 2>&1 &
perf=$!
HELPERS+=("$perf")
ok=0
for _ in $(seq 300); do
	"$BRAID" stat --dir /dev/shm --pid "$perf" >"$out" 2>&1
	grep -Eq '^    [0-9]+ +send [0-9]+ +[^ ]+ +[1-9][0-9]* ' "$out" && { ok=1; break; }
	kill -0 "$perf" 2>/dev/null || break
	sleep 0.1
done
cat "$out"
[ $ok -eq 1 ] || { fail "braid perf's send comm never sent in braid stat:"; show "$T/perf"; finish; }
peer=$(ps -o pid= --ppid "$perf" | tr -d ' ' | head -n1)
expect "$out" "^pid $perf  SLOW PATH  live, up " "perf (streaming side): live, marked SLOW PATH"
expect "$out" "^  liveness: live: holds its counters file's lock$" "perf: live by its lock, this namespace"
expect "$out" "^  backend ofi, provider tcp;ofi_rxm: SLOW PATH$" "perf: backend ofi, provider tcp;ofi_rxm"
expect "$out" "^  why: ofi provider tcp;ofi_rxm: named by BRAID_OFI_PROVIDER" "perf: why"
expect "$out" "^  GPUDirect RDMA off \(mode none\): " "perf: GPUDirect off and why"
expect "$out" "^  comms: [0-9]+ \([1-9][0-9]* send, [0-9]+ recv\)$" "perf: its comms counted"
expect "$out" "^    0   [^ ]+ +[1-9][0-9]* " "perf: device 0 has sent bytes"
if [ -n "$peer" ]; then
	"$BRAID" stat --dir /dev/shm --pid "$peer" >"$T/peer" 2>&1
	cat "$T/peer"
	expect "$T/peer" "^pid $peer  SLOW PATH  live, up " "perf's peer process: live, marked"
	expect "$T/peer" "^  backend ofi, provider tcp;ofi_rxm: SLOW PATH$" "peer: backend and provider"
else
	fail "braid perf's peer process not found"
fi
"$BRAID" stat --dir /dev/shm --pid "$perf" --watch 0.5 --count 1 >"$out" 2>&1
cat "$out"
expect "$out" "^  0   [^ ]+ +[0-9]*[1-9][0-9]*\.[0-9] " "--watch: device 0 sends at a rate above 0"

wait "$perf"
rc=$?
[ $rc -eq 0 ] && pass "braid perf succeeded" || { fail "braid perf: exit $rc"; show "$T/perf"; }
"$BRAID" stat --dir /dev/shm --pid "$perf" >"$out" 2>&1
expect "$out" "^braid stat: /dev/shm: 0 running braid process\(es\) \(0 on a slow path\), 0 ended, 0 file\(s\) not read$" \
	"perf done: its file removed, nothing listed"
[ -e "/dev/shm/braid-$perf" ] && fail "/dev/shm/braid-$perf still there" || pass "no /dev/shm/braid-$perf"
finish
