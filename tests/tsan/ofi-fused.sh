#!/usr/bin/env bash
# The threaded conformance scenarios under ThreadSanitizer (tests/tsan/lib.sh): net_ofi on
# one device fused from two tcp;ofi_rxm NICs, two veth pairs between network namespaces
# (tests/conformance/netns-fused.sh): a comm's lanes on two devices, each with its own
# ep_lock and CQ, the NIC watch (net_ofi/ofi_live.c) that waiting comms share, and the
# link watcher thread (net_ofi/ofi_watch.c), kept busy by link events all along
# (LINK_CHURN). Needs root; skipped without it.
set -u
. "$(dirname "$0")/lib.sh"
export PERF=0 LINK_CHURN=1
tsan_run ofi-fused tests/conformance/netns-fused.sh
