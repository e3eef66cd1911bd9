# Shared by the tests/ib scripts (sourced): the conformance helpers, plus softverbs as the
# verbs library and a private fabric directory removed on exit.
. "$(dirname "${BASH_SOURCE[0]}")/../conformance/lib.sh"

SV_DIR=$(cd "$BUILD/softverbs" 2>/dev/null && pwd) || die "$BUILD/softverbs is missing: run make first"
[ -f "$SV_DIR/libibverbs.so.1" ] || die "$SV_DIR/libibverbs.so.1 is missing: run make first"
export LD_LIBRARY_PATH="$SV_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Unix socket paths live under the fabric directory: keep it short.
SV_FABRIC=$(mktemp -d /tmp/svib.XXXXXX)
export SOFTVERBS_FABRIC=$SV_FABRIC
export BRAID_BACKEND=ib
# 1,024 verbs comms take softverbs ~4 s to open (4 QPs each on RoCE, every QP its own
# socket): three rounds show descriptors and memory coming back; ten run over libfabric.
export CONF_MANY_ROUNDS=${CONF_MANY_ROUNDS:-3}
IB_CLEANUP=()
ib_cleanup() {
	for c in "${IB_CLEANUP[@]+"${IB_CLEANUP[@]}"}"; do eval "$c"; done
	rm -rf "$SV_FABRIC"
}
trap ib_cleanup EXIT
trap 'exit 1' INT TERM
