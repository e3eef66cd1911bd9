#!/usr/bin/env bash
# Run libFuzzer targets (tests/fuzz/fuzz.mk) for FUZZ_SECONDS each (10 in make test, 60
# in make fuzz), each from its committed corpus tests/fuzz/corpus/<target>/ (seeds and
# regression inputs, all replayed first), new inputs kept in $BUILD/fuzz/corpus/<target>/.
# A crash, leak, sanitizer report or a target's own check fails the run; the input is
# kept as $BUILD/fuzz/crashes/<target>-crash-* and replays with `$BUILD/fuzz/fuzz_<target>
# FILE`. Arguments: target names (default: every one). Prints executions per target and
# in all.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
seconds=${FUZZ_SECONDS:-10}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(handle ib_wire ofi_blob link env stat_region)

if [ ! -x "$build/fuzz/fuzz_handle" ]; then
	case $(basename "$build") in
	*san*) echo "SKIP: a sanitizer build ($build); the plain make test runs the fuzz targets"
	       exit 77 ;;
	esac
	cc=$(command -v clang-14 || command -v clang)
	if [ -z "$cc" ]; then
		echo "SKIP: no clang (Debian: clang-14, libclang-rt-14-dev)"; exit 77
	fi
	rt=$("$cc" -print-runtime-dir 2>/dev/null)
	if [ ! -e "$rt/libclang_rt.fuzzer-x86_64.a" ]; then
		echo "SKIP: $cc has no libFuzzer runtime (Debian: libclang-rt-14-dev)"; exit 77
	fi
	echo "FAIL: clang with libFuzzer is here but $build/fuzz/fuzz_handle was not built"
	exit 1
fi

total=0 failed=0
for t in "${targets[@]}"; do
	bin=$build/fuzz/fuzz_$t
	seed=$root/tests/fuzz/corpus/$t
	work=$build/fuzz/corpus/$t
	log=$build/fuzz/$t.log
	mkdir -p "$work" "$build/fuzz/crashes"
	if [ ! -x "$bin" ] || [ ! -d "$seed" ]; then
		echo "FAIL: $t: no $bin or no $seed"; failed=$((failed + 1)); continue
	fi
	"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 \
		-print_final_stats=1 \
		-artifact_prefix="$build/fuzz/crashes/$t-" "$work" "$seed" >"$log" 2>&1
	rc=$?
	execs=$(awk '/stat::number_of_executed_units:/ { print $2 }' "$log" | tail -n 1)
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1)
	corp=$(ls "$work" | wc -l)
	execs=${execs:-0}
	total=$((total + execs))
	if [ $rc -ne 0 ]; then
		failed=$((failed + 1))
		echo "FAIL: $t (rc $rc) after $execs executions; the report:"
		grep -E 'ERROR|SUMMARY|runtime error|Test unit written|deadly signal' "$log" | head -n 20
		echo "---- last lines of $log"; tail -n 30 "$log"
	else
		echo "$t: $execs executions in ${seconds}s, $cov, $corp inputs in $work, 0 crashes"
	fi
done
echo "fuzz: ${#targets[@]} targets, $total executions in all, $failed failed"
[ $failed -eq 0 ]
