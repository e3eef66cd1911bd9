#!/usr/bin/env bash
# The threaded conformance scenarios under ThreadSanitizer (tests/tsan/lib.sh): shm.
set -u
. "$(dirname "$0")/lib.sh"
tsan_run shm tests/conformance/shm.sh
