#!/usr/bin/env bash
# The threaded conformance scenarios under ThreadSanitizer (tests/tsan/lib.sh): tcp.
set -u
. "$(dirname "$0")/lib.sh"
tsan_run tcp tests/conformance/tcp.sh
