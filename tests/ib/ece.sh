#!/usr/bin/env bash
# Enhanced Connection Establishment (NCCL_IB_ECE_ENABLE, docs/ib.md), negotiated as NCCL's
# IB transport does: the connecting side offers its QPs' options, the accepting side sets
# them (its NIC keeps what it supports) and answers with what it accepted, which the
# connecting side then sets. softverbs' devices offer the options SOFTVERBS_ECE gives them
# (per process, so the two ranks differ) and count each QP's final options (ece=):
#   - 0x7 offered, 0x3 supported by the other NIC: every QP end of the connection at 0x3;
#   - one NIC without ECE: no QP end sets any, and data still moves;
#   - NCCL_IB_ECE_ENABLE=0: no QP end sets any.
# The tiny scenario checks every byte it moves.
set -u
. "$(dirname "$0")/lib.sh"
need "$STAT"
export SOFTVERBS_DEVICES=svroce0:roce:1 BRAID_IB_HCA==svroce0 BRAID_SOCKET_IFNAME=lo
export BRAID_IB_QPS_PER_CONN=2 NCCL_DEBUG=INFO
dir=$SV_FABRIC.run snap=$SV_FABRIC.snap
IB_CLEANUP+=('rm -rf "$dir" "$snap"')
fails=0
bad() { echo "  FAIL: $*"; fails=$((fails + 1)); }

pair() { # ECE_A ECE_B [VAR=VALUE...]: rank a listens, b connects; QP ends' ece= into $snap
	local ea=$1 eb=$2
	shift 2
	rm -rf "${SV_FABRIC:?}"/* "$dir" && mkdir -p "$dir"
	env SOFTVERBS_STATS_KEEP=1 SOFTVERBS_ECE="$ea" "$@" timeout 120 "$CONF_BIN" \
		--plugin "$PLUGIN_SO" --api 11 --scenario tiny --role a --dir "$dir" >"$dir/a.log" 2>&1 &
	local pa=$!
	env SOFTVERBS_STATS_KEEP=1 SOFTVERBS_ECE="$eb" "$@" timeout 120 "$CONF_BIN" \
		--plugin "$PLUGIN_SO" --api 11 --scenario tiny --role b --dir "$dir" >"$dir/b.log" 2>&1
	local rb=$? ra=0
	wait $pa || ra=$?
	[ $ra = 0 ] && [ $rb = 0 ] || { bad "tiny failed: rc a=$ra b=$rb"; tail -n 5 "$dir"/*.log; }
	"$STAT" -a | grep '^qp ' | sed -E 's/.* ece=(0x[0-9a-f]+|0) .*/\1/' >"$snap"
}
ends() { # WANT: every QP end's options are WANT, and there are some
	local n
	n=$(wc -l <"$snap")
	[ "$n" -gt 0 ] && [ "$(grep -cvx "$1" "$snap")" = 0 ] ||
		{ bad "want every QP end at ECE $1: $(sort "$snap" | uniq -c | tr '\n' ' ')"; return; }
	echo "  $n QP ends at ECE $1"
}

echo "== rank a's NIC offers 0x7, rank b's supports 0x3"
pair svroce0:0x7 svroce0:0x3
ends 0x3
grep -hq "ready, .* ece 0x3" "$dir"/a.log "$dir"/b.log || bad "braid's ready line has no 'ece 0x3'"

echo "== rank a's NIC has no ECE"
pair "" svroce0:0x7
ends 0

echo "== NCCL_IB_ECE_ENABLE=0"
pair svroce0:0x7 svroce0:0x7 NCCL_IB_ECE_ENABLE=0
ends 0

echo "== both offer 0x5"
pair svroce0:0x5 svroce0:0x5
ends 0x5

[ $fails = 0 ] || die "$fails check(s) failed"
echo "PASS: ECE negotiated as NCCL_IB_ECE_ENABLE says"
