#!/usr/bin/env bash
# Adaptive striping on net_ofi (issue 17): a fused device of two veth pairs between two
# network namespaces, the first shaped by tc to 800 Mbit/s and the second to 200 (R and
# R/4), braid perf over tcp;ofi_rxm (tests/conformance/netns-fused.sh does the set-up and
# checks every verified byte). What is asserted is where the bytes went, not a rate:
# - BRAID_STRIPE=adaptive: the sender measures each lane and sends the receiver its
#   weights, the receiver cuts by them: the slow lane carries at most 35% of the bytes
#   (ideal 20%; the first messages go out equal), and is named slow;
# - BRAID_STRIPE=equal: exactly 50%, the cut without the sender's weights;
# - adaptive with 64 KiB messages, too small to split (one 64 KiB chunk at least a part),
#   so each goes whole to one lane: the slow lane carries at least 5% of the bytes (it is
#   used, and measured) and at most 35%. Each goes to the lane that would be done with it
#   first, by the weights; before, to the one with the fewest bytes outstanding, and the
#   receiver, which posts a window of receives at once, alternated (46%: R + R/4 carried
#   half of what R alone did).
# The rates are printed, for the eye (docs/benchmarks.md has measured ones). Needs root.
set -u
. "$(dirname "$0")/lib.sh"
netns_prereqs
export BUILD

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# share of the second NIC, in percent, from braid perf's table of the send comm
second_share() { awk '/^# send comm to/ { t = 1; n = 0; next } t && /^#   / && $3 ~ /^[0-9]+$/ { if (++n == 2) { sub(/%/, "", $5); print $5; exit } }' "$1"; }
# the second NIC's part of the bytes sent, in percent (the share column is its weight)
second_bytes() { awk '/^# send comm to/ { t = 1; n = 0; next } t && /^#   / && $3 ~ /^[0-9]+$/ { b[++n] = $3; if (n == 2) { printf "%.1f\n", 100 * b[2] / (b[1] + b[2]); exit } }' "$1"; }
second_slow() { awk '/^# send comm to/ { t = 1; n = 0; next } t && /^#   / && $3 ~ /^[0-9]+$/ { if (++n == 2) { print $7; exit } }' "$1"; }

for mode in adaptive equal whole; do
	size=4M iters=96 stripe=$mode
	[ $mode = whole ] && size=64K iters=1000 stripe=adaptive
	BRAID_STRIPE=$stripe RATE_MBIT=800 RATE_MBIT2=200 PERF_MIN=$size PERF_MAX=$size \
		PERF_ITERS=$iters bash "$(dirname "$0")/netns-fused.sh" >"$tmp/$mode" 2>&1 ||
		{ tail -20 "$tmp/$mode"; die "braid perf on the shaped fused device ($mode)"; }
	share=$(second_share "$tmp/$mode")
	[ -n "$share" ] || { cat "$tmp/$mode"; die "no lane table in braid perf's output ($mode)"; }
	echo "$mode ($size): the R/4 lane's weight $share%;" \
		"$(awk -v s="$(numfmt --from=iec $size)" '$1 == s { print $4 " GB/s" }' "$tmp/$mode")"
	grep -A3 '^# send comm to' "$tmp/$mode"
	case $mode in
	whole)
		share=$(second_bytes "$tmp/$mode")
		echo "whole: the R/4 lane carried $share% of the bytes sent"
		awk -v s="$share" 'BEGIN { exit !(s >= 5 && s <= 35) }' ||
			die "adaptive, 64 KiB messages whole: the lane at R/4 carried $share% of the bytes (5% to 35% expected)"
		;;
	adaptive)
		awk -v s="$share" 'BEGIN { exit !(s <= 35) }' ||
			die "adaptive: the lane at R/4 carried $share% of the bytes (at most 35% expected)"
		[ "$(second_slow "$tmp/$mode")" = yes ] || die "adaptive: the lane at R/4 was not named slow"
		;;
	equal)
		[ "$share" = 50.0 ] || die "equal: the lane at R/4 carried $share% of the bytes, not 50.0%"
		;;
	esac
done
echo "netns-adaptive: all passed"
