#!/usr/bin/env bash
# tests/ib/async-race.sh under ThreadSanitizer (tests/tsan/lib.sh): net_ib's async event
# dispatch on a fused comm over two softverbs HCAs, with one thread per HCA reporting at
# once, and events dispatched while comms are being built.
set -u
. "$(dirname "$0")/lib.sh"
tsan_prog ib-async tests/ib/async-race.sh
