# Sourced by tests/tsan/*.sh (make check TSAN=1, build-tsan/): the conformance
# scenarios that drive the plugin from several threads at once, through one transport,
# under ThreadSanitizer. Any TSan report fails, unless tests/tsan/tsan.supp suppresses
# it with its reason.
#   threads    two comms, one each way, each driven from its own thread (v11: each
#              thread its own init and finalize, concurrently)
#   isolation  one comm truncates and fails on one thread while another streams 1 GiB on
#              the same device from a second thread
# with the providers' own threads (libfabric's, softverbs' engine) alongside. API
# versions 8 and 11 (v11 adds the concurrent init/finalize). TSAN_SCENARIOS and
# TSAN_APIS choose others. libfabric is not instrumented: races inside it are not seen.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build-tsan}
export BUILD
CONF_BIN=$BUILD/tests/conformance/conformance
PLUGIN_SO=$BUILD/libnccl-net-braid.so
if [ ! -x "$CONF_BIN" ] || [ ! -f "$PLUGIN_SO" ]; then
	echo "FAIL: $CONF_BIN or $PLUGIN_SO is missing: make TSAN=1"
	exit 1
fi
if ! nm "$CONF_BIN" 2>/dev/null | grep -q '__tsan_init'; then
	echo "SKIP: $BUILD is not a ThreadSanitizer build (make check TSAN=1 runs this)"
	exit 77
fi
scen=${TSAN_SCENARIOS:-threads,isolation}
apis=${TSAN_APIS:-8,11}
logs=$(mktemp -d /tmp/braid-tsan.XXXXXX)
trap 'rm -rf "$logs"' EXIT
# halt_on_error=0: every report of a process is listed; log_path: one file per process
# (the driver forks one per side), counted below whatever the driver's exit status.
export TSAN_OPTIONS="suppressions=$here/tsan.supp:halt_on_error=0:exitcode=66:second_deadlock_stack=1:log_path=$logs/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# tsan_run NAME SCRIPT: the scenarios through one transport's conformance script; exits
# 0 with no report, 77 when the transport is not usable here, else 1.
tsan_run() {
	echo "== $1: scenarios $scen, API $apis, under ThreadSanitizer"
	tsan_script "$1" "$2" --api "$apis" --scenario "$scen"
}

# tsan_prog NAME SCRIPT: a test script that runs a program of $BUILD as it is; exits as
# tsan_run.
tsan_prog() {
	echo "== $1: $2 under ThreadSanitizer"
	tsan_script "$1" "$2"
}

tsan_script() {
	local name=$1 script=$2 rc reports

	shift 2
	"$root/$script" "$@" >"$logs/$name.out" 2>&1
	rc=$?
	reports=$(cat "$logs"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer')
	if [ "$rc" -eq 77 ]; then
		tail -n 1 "$logs/$name.out"
		exit 77
	fi
	if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ]; then
		echo "FAIL: $name: rc $rc, $reports ThreadSanitizer reports"
		tail -n 15 "$logs/$name.out"
		cat "$logs"/tsan.* 2>/dev/null | head -n 300
		exit 1
	fi
	tail -n 5 "$logs/$name.out"
	echo "tsan: $name: 0 reports"
	exit 0
}
