#!/usr/bin/env bash
# The conformance suite, unchanged, on a fused device: two softverbs RoCE NICs (svroce0,
# svroce1) joined by BRAID_MERGE into one NCCL device, so every comm stripes over both.
# Messages of 64 KiB and up are split (BRAID_STRIPE_BYTES), so the suite's sizes cover
# both the split and the whole-to-one-NIC paths.
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1 BRAID_IB_HCA==svroce0,svroce1
export BRAID_MERGE=svroce0+svroce1 BRAID_STRIPE_BYTES=${BRAID_STRIPE_BYTES:-65536}
export BRAID_SOCKET_IFNAME=lo
"$CONF_BIN" --plugin "$PLUGIN_SO" "$@" || exit 1
[ $# -eq 0 ] || exit 0
# One NIC far slower than the other (softverbs paces it): every byte still lands right,
# grouped receives of mixed sizes and sends in another order included.
echo "== svroce1 at 1/10 of svroce0"
SOFTVERBS_DEVICE_RATE_MBPS=svroce0:500,svroce1:50 \
	"$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario groups,tag-order,truncate,tiny || exit 1
# svroce1's ports take messages of at most 6 MiB (softverbs' max_msg_sz): the stream's
# 64 MiB message puts about 32 MiB on it, which its 4 QPs alone would carry in 8 MiB
# writes; the chunker cuts that part in writes of at most 6 MiB instead.
echo "== svroce1 with max_msg_sz 6 MiB"
SOFTVERBS_DEVICE_MAX_MSG_SZ=svroce1:6291456 \
	"$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario stream || exit 1
# Each NIC's record holds the bytes it carried (braid stat's device rows, and the summary
# lines at close): a fused comm's bytes were all counted on its first NIC, so the second
# read as a dead rail (tx 0 B) while it carried half the traffic.
echo "== each NIC counts its part of a fused comm's bytes"
need "$BRAID"
log=$SV_FABRIC.perf
NCCL_DEBUG=INFO "$BRAID" perf --backend ib --bw-only --min 4M --max 4M --iters 200 \
	>"$log" 2>&1 || die "braid perf failed: $(tail -n 3 "$log")"
# "braid-perf[(peer)]:PID:TID ... summary: dev N NAME tx X B in M msgs, rx Y B ..."
awk '/summary: dev [0-9]+ / {
	who = $1; sub(/:.*/, "", who)
	for (i = 1; i < NF; i++) {
		if ($i == "dev") name = $(i + 2)
		if ($i == "tx") tx = $(i + 1)
		if ($i == "rx") rx = $(i + 1)
	}
	printf "%s %s %s %s\n", who, name, tx, rx
}' "$log" >"$log.nics"
sed 's/^/  /' "$log.nics"
awk '{ tx[$1] += $3; rx[$1] += $4; ntx[$1, $2] = $3; nrx[$1, $2] = $4; nic[$2] = 1 }
	END {
		bad = 0
		for (w in tx) for (n in nic) {
			# the streaming side sends 800 MiB, its peer receives them
			if (tx[w] > 1e8 && ntx[w, n] < tx[w] / 10) { print "  FAIL: " w " sent " ntx[w, n] " of " tx[w] " B on " n; bad = 1 }
			if (rx[w] > 1e8 && nrx[w, n] < rx[w] / 10) { print "  FAIL: " w " received " nrx[w, n] " of " rx[w] " B on " n; bad = 1 }
		}
		exit bad
	}' "$log.nics" || die "a NIC's record misses its part of the fused comm's bytes"
grep -q . "$log.nics" || die "no summary lines in braid perf's log"
