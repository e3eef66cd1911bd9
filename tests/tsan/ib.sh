#!/usr/bin/env bash
# The threaded conformance scenarios under ThreadSanitizer (tests/tsan/lib.sh): ib.
set -u
. "$(dirname "$0")/lib.sh"
tsan_run ib tests/ib/conformance-ib.sh
