# shellcheck shell=bash
# Sourced by tests/doctor/*.sh (BUILD in the environment, as tests/run-tests.sh sets it):
# the braid binary, a clean environment (no NCCL_*, BRAID_FSROOT or HWLOC_XMLFILE from the
# caller), a temporary directory removed at exit, and assertions on `braid doctor`'s table:
# `doc ARGS...` runs it (output in $OUT, exit status in $RC), `status ID STATUS WHAT`
# asserts a check's line, `rc N WHAT` the exit status. A script ends with `finish`.
BUILD=${BUILD:-build}
BRAID=$BUILD/braid
if [ ! -x "$BRAID" ]; then
	echo "FAIL: $BRAID is missing: make first"
	exit 1
fi
# shellcheck disable=SC2034 # HOSTS and TOPO: for the scripts that source this
HOSTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/hosts
# shellcheck disable=SC2034
TOPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../topo" && pwd)
while read -r v; do unset "$v"; done < <(env | sed -n 's/^\(NCCL_[A-Z0-9_]*\)=.*/\1/p')
unset BRAID_FSROOT HWLOC_XMLFILE
T=$(mktemp -d /tmp/braid-doctor-test.XXXXXX)
OUT=$T/out
RC=0
trap 'rm -rf "$T"' EXIT
nfail=0

pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
show() { sed 's/^/    | /' "$OUT"; }
doc() {
	echo "+ braid doctor $*"
	"$BRAID" doctor "$@" >"$OUT" 2>&1
	RC=$?
}
# status ID STATUS WHAT: the table has the line of check ID with STATUS
status() {
	local pre
	pre=$(printf '%-6s %-28s ' "$2" "$1")
	if awk -v p="$pre" 'index($0, p) == 1 { f = 1 } END { exit !f }' "$OUT"; then
		pass "$3: $1 is $2"
	else
		fail "$3: no line '$2 $1' in:"
		show
	fi
}
# has ERE WHAT: some line of the output matches
has() {
	if grep -Eq -- "$1" "$OUT"; then pass "$2"; else fail "$2: no line matches /$1/ in:"; show; fi
}
# has_not ERE WHAT: no line of the output matches
has_not() {
	if grep -Eq -- "$1" "$OUT"; then fail "$2: a line matches /$1/ in:"; show; else pass "$2"; fi
}
rc() {
	if [ "$RC" -eq "$1" ]; then pass "$2: exit $1"; else fail "$2: exit $RC, expected $1:"; show; fi
}
# Variants of roce-good for the GID choice (its port: fe80 v1/v2 at 0/1, 10.0.0.1 v1/v2
# at 2/3). two_v4_host DIR: 192.168.7.1 too, v1/v2 at 4/5. v1_only_host DIR: the v2
# entries gone, RoCE v1 GIDs only.
two_v4_host() {
	local port=$1/sys/class/infiniband/mlx5_0/ports/1
	cp -a "$HOSTS/roce-good" "$1"
	for i in 4 5; do
		echo 0000:0000:0000:0000:0000:ffff:c0a8:0701 >"$port/gids/$i"
		echo eth2 >"$port/gid_attrs/ndevs/$i"
	done
	echo "IB/RoCE v1" >"$port/gid_attrs/types/4"
	echo "RoCE v2" >"$port/gid_attrs/types/5"
}
v1_only_host() {
	local port=$1/sys/class/infiniband/mlx5_0/ports/1
	cp -a "$HOSTS/roce-good" "$1"
	rm "$port"/gids/{1,3} "$port"/gid_attrs/types/{1,3} "$port"/gid_attrs/ndevs/{1,3}
}
finish() {
	if [ "$nfail" -gt 0 ]; then
		echo "$nfail assertion(s) failed"
		exit 1
	fi
	echo "all assertions held"
	exit 0
}
