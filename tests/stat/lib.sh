# shellcheck shell=bash
# Sourced by tests/stat/*.sh (BUILD in the environment, as tests/run-tests.sh sets it):
# the braid binary, mkregion (counters files as the plugin writes them), a temporary
# BRAID_SHM_DIR removed at exit with every helper started here, and assertions that say
# what they looked for and show the output they looked in. A script ends with `finish`:
# exit 0 when every assertion held, 1 otherwise, 77 (skip) through skip().
BUILD=${BUILD:-build}
BRAID=$BUILD/braid
MK=$BUILD/tests/stat/mkregion
if [ ! -x "$BRAID" ] || [ ! -x "$MK" ]; then
	echo "FAIL: $BRAID or $MK is missing: make first"
	exit 1
fi
T=$(mktemp -d /tmp/braid-stat-test.XXXXXX)
export BRAID_SHM_DIR=$T/shm
mkdir -p "$BRAID_SHM_DIR"
HELPERS=()
nfail=0
cleanup() {
	local p
	# a helper's own children too: unshare --fork ignores SIGTERM (namespaces.sh)
	for p in "${HELPERS[@]+"${HELPERS[@]}"}"; do
		# shellcheck disable=SC2046 # a list of pids, or none
		kill -KILL $(ps -o pid= --ppid "$p") 2>/dev/null
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

skip() { echo "SKIP: $*"; exit 77; }
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
show() { sed 's/^/    | /' "$1"; }
# expect FILE ERE WHAT: some line of FILE matches
expect() {
	if grep -Eq -- "$2" "$1"; then pass "$3"; else fail "$3: no line matches /$2/ in:"; show "$1"; fi
}
# expect_not FILE ERE WHAT: no line of FILE matches
expect_not() {
	if grep -Eq -- "$2" "$1"; then
		fail "$3: a line matches /$2/:"
		grep -En -- "$2" "$1" | sed 's/^/    | /'
	else
		pass "$3"
	fi
}
# line_of FILE ERE: number of the first matching line, 0 when none
line_of() { grep -Enm1 -- "$2" "$1" | cut -d: -f1 | grep . || echo 0; }
# expect_before FILE ERE1 ERE2 WHAT: both present, the first match of ERE1 comes first
expect_before() {
	local a b
	a=$(line_of "$1" "$2")
	b=$(line_of "$1" "$3")
	if [ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ "$a" -lt "$b" ]; then
		pass "$4"
	else
		fail "$4: /$2/ at line $a, /$3/ at line $b:"
		show "$1"
	fi
}
# hold ARGS...: mkregion --hold in the background, as a running braid process (its file
# is $BRAID_SHM_DIR/braid-$HELD unless ARGS has --file); waits until it holds the lock
hold() {
	local out=$T/hold.${#HELPERS[@]} _
	"$MK" --hold 60 "$@" >"$out" 2>&1 &
	HELD=$!
	HELPERS+=("$HELD")
	for _ in $(seq 200); do
		grep -q '^ready ' "$out" && return 0
		kill -0 "$HELD" 2>/dev/null || break
		sleep 0.05
	done
	echo "FAIL: mkregion --hold $* did not start:"
	show "$out"
	exit 1
}
# a pid that no process has now (a child that was reaped)
dead_pid() {
	sleep 0 &
	local p=$!
	wait "$p"
	echo "$p"
}
finish() {
	if [ "$nfail" -eq 0 ]; then
		echo "PASS"
		exit 0
	fi
	echo "FAIL: $nfail assertion(s) failed"
	exit 1
}
