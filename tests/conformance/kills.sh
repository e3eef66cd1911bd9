#!/usr/bin/env bash
# Kills at every step (issue 13): the kill-any scenario, KILLS_RUNS times on each of ofi
# tcp;ofi_rxm, ib on softverbs, and (as root) both across network namespaces. Run i kills
# in step i mod 6 (connect, accept, transfer, grouped receive, iflush, close) at a moment
# drawn from its seed (seed0 + i); any failure prints the command that replays it.
# make test: KILLS_RUNS=6 (each step once) locally, KILLS_NETNS_RUNS=2 across namespaces;
# make soak: 100 each.
set -u
here=$(dirname "$0")
. "$here/lib.sh"
# the iflush step reads the buffer back on ofi too (net_ofi/ofi_flush.c), not a NULL request
export BRAID_OFI_FLUSH=${BRAID_OFI_FLUSH:-always}
runs_local=${KILLS_RUNS:-6}
runs_netns=${KILLS_NETNS_RUNS:-2}
runs=$runs_local
seed0=${CONF_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "kills: $runs_local runs per local transport, $runs_netns across namespaces, seeds from $seed0"
pass=0 fail=0 skipped=()
t0=$SECONDS

run_one() { # transport script [args]
	local name=$1 script=$2 i seed out rc
	for ((i = 0; i < runs; i++)); do
		seed=$((seed0 + i))
		out=$(CONF_KILL_STEP=$((i % 6)) CONF_SEED=$seed CONF_NETNS_SCENARIOS_ONLY=1 \
			timeout 300 "$script" --api 11 --scenario kill-any --seed "$seed" 2>&1)
		rc=$?
		if [ "$rc" -eq 77 ]; then
			skipped+=("$name: ${out##*SKIP: }")
			return
		fi
		if [ "$rc" -eq 0 ]; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
			echo "$out" | tail -n 40
			echo "FAIL $name run $i (step $((i % 6)), seed $seed): replay with" \
				"CONF_KILL_STEP=$((i % 6)) CONF_SEED=$seed $script --api 11 --scenario kill-any --seed $seed"
		fi
	done
	echo "$name: $runs runs done ($pass passed, $fail failed so far, $((SECONDS - t0)) s)"
}

run_one tcp "$here/tcp.sh"
run_one ib-softverbs "$here/../ib/conformance-ib.sh"
runs=$runs_netns
run_one netns-tcp "$here/netns.sh"
run_one netns-ib "$here/../ib/conformance-netns.sh"
for s in "${skipped[@]+"${skipped[@]}"}"; do echo "skipped: $s"; done
echo "kills: $pass passed, $fail failed in $((SECONDS - t0)) s (seed0 $seed0)"
[ "$fail" -eq 0 ] || die "kills: $fail run(s) failed"
[ "$pass" -gt 0 ] || skip "no transport could run (${skipped[*]})"
