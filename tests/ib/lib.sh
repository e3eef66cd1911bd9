# Shared by the tests/ib scripts (sourced): the conformance helpers, plus softverbs as the
# verbs library and a private fabric directory removed on exit.
. "$(dirname "${BASH_SOURCE[0]}")/../conformance/lib.sh"

SV_DIR=$(cd "$BUILD/softverbs" 2>/dev/null && pwd) || die "$BUILD/softverbs is missing: run make first"
need "$SV_DIR/libibverbs.so.1"
# Built in every build but the TSAN one, which makes no braid command: scripts check what
# they use with need.
BRAID=$BUILD/braid STAT=$SV_DIR/softverbs-stat
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

# The QPs of the send comm that carried a braid perf run's data, one per line: "qpn
# remote_qpn flow_label sport". From LOG's "ib: send comm to ... ready ..., 4 QP(s): 0xA->0xB
# fl 0xF sport S, ..." lines (NCCL_DEBUG=INFO): both processes have a send comm (perf's
# control messages go both ways), so the one picked is the one whose first QP sent the most
# bytes in SNAP (softverbs-stat -a).
ib_qp_row() { grep -E "^qp pid=[0-9]+ qpn=0x0*${2#0x} " "$1"; } # SNAP QPN
ib_send_qps() { # LOG SNAP
	local best=-1 pick="" line q b
	while read -r line; do
		q=$(echo "$line" | sed -E 's/.*QP\(s\): //; s/:[0-9]+$//' | tr ',' '\n' |
			sed -E 's/^ *(0x[0-9a-f]+)->(0x[0-9a-f]+) fl (0x[0-9a-f]+|0) sport ([0-9]+).*/\1 \2 \3 \4/')
		b=$(ib_qp_row "$2" "$(echo "$q" | head -n 1 | awk '{ print $1 }')" |
			sed -E 's/.* tx_bytes=([0-9]+) .*/\1/')
		[ "${b:-0}" -gt "$best" ] && { best=${b:-0}; pick=$q; }
	done < <(grep 'ib: send comm to .* ready' "$1")
	echo "$pick"
}
