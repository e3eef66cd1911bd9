#!/usr/bin/env bash
# A caller descheduled right after ibv_post_send (a loaded machine): softverbs'
# SOFTVERBS_POST_SEND_DELAY_US holds every ibv_post_send for 200 us after it queued the WRs,
# so the write goes out, the peer completes the group and reuses its FIFO slot before the
# sender is back. Regression test: isend read the group's buffer count from the FIFO slot
# after posting the group's last write, got the next group's count (slot seq + 32, already
# written by the receiver), never counted the group as done and both sides waited for ever
# (CI: "no progress for 90 s" in the groups scenario under SAN and load, about 1 run in 200;
# with the delay, every run).
set -u
. "$(dirname "$0")/lib.sh"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
export SOFTVERBS_POST_SEND_DELAY_US=200
"$CONF_BIN" --plugin "$PLUGIN_SO" --api 10,11 --scenario groups,stream "$@"
