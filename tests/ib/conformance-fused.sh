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
	"$CONF_BIN" --plugin "$PLUGIN_SO" --api 11 --scenario stream
