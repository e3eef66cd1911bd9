#!/usr/bin/env bash
# net_ib's async event dispatch on a device fused from two softverbs HCAs while comms
# connect and while both HCAs report at once (tests/ib/async_race.c says what it checks).
# tests/tsan/ib-async.sh runs the same program under ThreadSanitizer.
set -u
. "$(dirname "$0")/lib.sh"
BIN=$BUILD/tests/ib/async-race
need "$BIN"
timeout 120 "$BIN" || die "async-race"
