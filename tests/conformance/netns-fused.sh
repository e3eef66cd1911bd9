#!/usr/bin/env bash
# Conformance on a fused libfabric device across two network namespaces joined by TWO veth
# pairs, one subnet each: each side fuses its two interfaces (tcp;ofi_rxm domains) with
# BRAID_MERGE, so every comm has one lane per veth pair. The handshake runs over the first
# pair. Then braid perf between the namespaces on the fused device. Needs root.
# RATE_MBIT=N shapes each veth with tc (tbf) (RATE_MBIT2: the second pair's rate, if not
# the same) and skips the conformance suite, and LANES=1 puts only the first pair in the
# device: tests/bench/multirail-ofi.sh (not a test). PERF=0 skips braid perf
# (tests/tsan/ofi-fused.sh: the ThreadSanitizer build has no braid command). LINK_CHURN=1
# changes the second pair's txqueuelen every 20 ms while the conformance runs: a stream of
# rtnetlink link events that changes nothing of the traffic, so the plugin's link watcher
# (net_ofi/ofi_watch.c) reads the NICs while the comms use them (tests/tsan/ofi-fused.sh).
set -u
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
netns_prereqs

netns_two_pairs netns-fused

so=$(cd "$(dirname "$PLUGIN_SO")" && pwd)/$(basename "$PLUGIN_SO")
seed=${CONF_SEED:-$(( (RANDOM << 15) | RANDOM ))}
common=(env BRAID_BACKEND=ofi BRAID_OFI_PROVIDER="tcp;ofi_rxm" BRAID_STRIPE_BYTES="${STRIPE_BYTES:-65536}"
	CONF_MANY_WARMUP=3) # 2,048 lane comms a round: memory is flat from the third
if [ "${LANES:-2}" = 1 ]; then
	merge_a=$a1 merge_b=$b1
else
	merge_a=$a1+$a2 merge_b=$b1+$b2
fi
side_a=("${common[@]}" BRAID_SOCKET_IFNAME="=$a1" BRAID_MERGE="$merge_a")
side_b=("${common[@]}" BRAID_SOCKET_IFNAME="=$b1" BRAID_MERGE="$merge_b")

if [ -z "${RATE_MBIT:-}" ]; then
	# LINK_CHURN: each side at INFO into a file (its other lines shown after), which must
	# say that the link watcher started, so that a run where it did not cannot pass
	churn_log=()
	[ "${LINK_CHURN:-0}" = 1 ] && churn_log=(NCCL_DEBUG=INFO)
	ip netns exec "$nsa" "${side_a[@]}" "${churn_log[@]}" "$CONF_BIN" --plugin "$so" --role a \
		--dir "$tmp" --seed "$seed" "$@" 2>"$tmp/side_a.err" &
	pids+=($!)
	ip netns exec "$nsb" "${side_b[@]}" "${churn_log[@]}" "$CONF_BIN" --plugin "$so" --role b \
		--dir "$tmp" --seed "$seed" "$@" 2>"$tmp/side_b.err" &
	pids+=($!)
	if [ "${LINK_CHURN:-0}" = 1 ]; then
		(
			q=1000
			while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
				q=$((2001 - q))
				ip -n "$nsa" link set "$a2" txqueuelen "$q"
				ip -n "$nsb" link set "$b2" txqueuelen "$q"
				sleep 0.02
			done
		) &
		churn=$!
	fi
	wait "${pids[0]}"; rc_a=$?
	wait "${pids[1]}"; rc_b=$?
	pids=()
	[ -z "${churn:-}" ] || wait "$churn"
	grep -hv ' NCCL INFO ' "$tmp/side_a.err" "$tmp/side_b.err" >&2
	echo "side a ($nsa): exit $rc_a; side b ($nsb): exit $rc_b"
	[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] ||
		die "conformance on a fused device across namespaces (seed $seed)"
	if [ "${LINK_CHURN:-0}" = 1 ]; then
		for side in a b; do
			n=$(grep -c 'ofi: watching the links of 2 NIC(s)' "$tmp/side_$side.err")
			echo "side $side: the link watcher started $n time(s)"
			[ "$n" -gt 0 ] || die "side $side: the link watcher never started (no INFO line)"
		done
	fi
fi

[ "${PERF:-1}" = 0 ] && { echo "netns-fused: conformance passed (PERF=0: no braid perf)"; exit 0; }

# braid perf between the namespaces on the fused device
braid=$(cd "$BUILD" && pwd)/braid
port=$((20000 + id % 20000))
popts=(--plugin "$so" --port "$port" --min ${PERF_MIN:-64} --max ${PERF_MAX:-4M}
	--iters ${PERF_ITERS:-20} --warmup 2 --lat-iters 100 --timeout 60)
ip netns exec "$nsa" "${side_a[@]}" timeout 300 "$braid" perf --server "${popts[@]}" \
	>"$tmp/perf.server" 2>&1 &
pids+=($!)
ip netns exec "$nsb" "${side_b[@]}" timeout 300 "$braid" perf --client 198.18.1.1 "${popts[@]}" \
	>"$tmp/perf.client" 2>&1
rc_c=$?
wait "${pids[0]}"; rc_s=$?
pids=()
grep -hv 'SLOW PATH' "$tmp/perf.server" "$tmp/perf.client"
[ "$rc_s" -eq 0 ] && [ "$rc_c" -eq 0 ] || die "braid perf on the fused device: server $rc_s, client $rc_c"
grep -q '^# data check: every verified iteration was right' "$tmp/perf.server" ||
	die "braid perf on the fused device: no clean data check"
grep -q "device 0: $merge_a," "$tmp/perf.server" || die "braid perf did not run on device $merge_a"
# A NIC down before connect (issue 19): the second pair goes down after init listed it and
# before the first comm forms (CONF_START_DELAY_MS, once both print it); the comms form on the first pair
# alone (stream: one process a side, since init lists only the interfaces that are up),
# with a WARN on each side naming the NIC left out, every byte right, and nothing
# sent over the second pair. Before, its lanes timed out and failed the comms.
if [ -z "${RATE_MBIT:-}" ] && [ "${LANES:-2}" = 2 ]; then
	txb() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
	echo "== $a2/$b2 down before connect"
	before=$(( $(txb "$nsa" "$a2") + $(txb "$nsb" "$b2") ))
	for side in a b; do
		eval "ns=\$ns$side"
		if [ $side = a ]; then env=("${side_a[@]}"); else env=("${side_b[@]}"); fi
		ip netns exec "$ns" "${env[@]}" CONF_START_DELAY_MS=2000 "$CONF_BIN" --plugin "$so" \
			--role $side --dir "$tmp/down" --seed "$seed" --api 12 \
			--scenario stream >"$tmp/down.$side" 2>&1 &
		pids+=($!)
	done
	mkdir -p "$tmp/down"
	for _ in $(seq 300); do # both sides past init: at most 30 s
		grep -q '^start delay' "$tmp/down.a" "$tmp/down.b" 2>/dev/null &&
			[ "$(grep -l '^start delay' "$tmp/down.a" "$tmp/down.b" | wc -l)" = 2 ] && break
		sleep 0.1
	done
	ip -n "$nsa" link set "$a2" down || die "$a2 down"
	wait "${pids[0]}"; rc_a=$?
	wait "${pids[1]}"; rc_b=$?
	pids=()
	ip -n "$nsa" link set "$a2" up || die "$a2 up"
	grep -h 'left out of the comm' "$tmp/down.a" "$tmp/down.b" | sed 's/.*NCCL WARN /  /' | sort -u | head -n 2
	after=$(( $(txb "$nsa" "$a2") + $(txb "$nsb" "$b2") ))
	[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] ||
		{ tail -n 5 "$tmp/down.a" "$tmp/down.b"; die "comms with $a2 down: a $rc_a, b $rc_b"; }
	grep -q "WARN.*ofi: accept from .*NIC $a2 (lane 1) left out of the comm, which runs on 1 of the device's 2 NICs" "$tmp/down.a" ||
		die "no WARN on a leaving $a2 out"
	grep -q "WARN.*ofi: connect to .*NIC $b2 (lane 1) left out of the comm, which runs on 1 of the device's 2 NICs" "$tmp/down.b" ||
		die "no WARN on b leaving $b2 out"
	echo "  $a2 and $b2 sent $((after - before)) bytes while down"
	[ $((after - before)) -lt 100000 ] || die "the down pair carried data"
fi
echo "netns-fused: all passed"
