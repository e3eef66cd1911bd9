#!/usr/bin/env bash
# Run each test (an executable or a script) with a time limit, print one line per test and
# a closing count. Exit status: 0 when nothing failed. A test exits 0 to pass, 77 to say
# it was skipped (with its reason on the last line of its output), anything else to fail.
# A skip is never counted as a pass. Each test's output goes to its log; for a failed test
# the log's lines that name a failure and its last lines are shown, and a passing test's
# whole log too with BRAID_TEST_SHOW_LOG=1.
set -u
limit=${BRAID_TEST_TIMEOUT:-450}
logdir=${BRAID_TEST_LOGDIR:-build/test-logs}
show_log=${BRAID_TEST_SHOW_LOG:-0}
mkdir -p "$logdir"
pass=0 fail=0 skip=0 failed=()
# libpsm2, which libfabric loads, catches a SIGSEGV, writes HOST-PID,vm.btr (a backtrace)
# into the process's directory and exits 1: a test that expects a process to fail would
# take that crash for the failure. A new one during a test fails it.
crash_files() { find . -maxdepth 1 -name '*.btr' | sort; }
for t in "$@"; do
	name=${t#./}
	log="$logdir/$(echo "$name" | tr '/' '_').log"
	start=$(date +%s.%N)
	btr_before=$(crash_files)
	timeout --kill-after=10 "$limit" "$t" >"$log" 2>&1
	rc=$?
	btr_new=$(comm -13 <(echo "$btr_before") <(crash_files))
	if [ -n "$btr_new" ]; then
		{ echo "CRASH: a process died of a signal (libpsm2's backtrace files):"
		  for f in $btr_new; do echo "== $f"; head -n 12 "$f"; done; } >>"$log"
		[ $rc -eq 0 ] || [ $rc -eq 77 ] && rc=1
	fi
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	case $rc in
	0) pass=$((pass + 1)); printf 'PASS  %-48s %6ss\n' "$name" "$secs" ;;
	77) skip=$((skip + 1))
	    printf 'SKIP  %-48s %s\n' "$name" "$(tail -n 1 "$log" | sed 's/^SKIP: *//')" ;;
	*) fail=$((fail + 1)); failed+=("$name")
	   [ $rc -ge 124 ] && why="timed out or killed, rc $rc" || why="rc $rc"
	   printf 'FAIL  %-48s %6ss (%s)\n' "$name" "$secs" "$why"
	   # the lines that say why first (a long log's tail may not), then the tail
	   echo "---- lines of $log that report a failure (at most 20)"
	   grep -E 'FAIL|ERROR|CRASH|[Aa]ssert|Sanitizer|: warning\(|: error\(' "$log" | head -n 20
	   echo "---- last lines of $log"; tail -n 40 "$log"; echo "----" ;;
	esac
	[ "$show_log" = 1 ] && [ "$rc" -eq 0 ] && { cat "$log"; echo; }
done
echo
for f in "${failed[@]+"${failed[@]}"}"; do echo "failed: $f"; done
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
