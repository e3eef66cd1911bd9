#!/usr/bin/env bash
# The threaded conformance scenarios under ThreadSanitizer (tests/tsan/lib.sh): ib on one
# device fused from two softverbs RoCE NICs (plugin/stripe.c splits messages over them).
set -u
. "$(dirname "$0")/lib.sh"
tsan_run ib-fused tests/ib/conformance-fused.sh
