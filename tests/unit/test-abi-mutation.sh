#!/usr/bin/env bash
# test_abi must catch every wrong layout: for every member of every struct that a v8..v12
# line of tests/unit/nccl-net-abi-v8-v12.txt names, copies of include/nccl_net_abi.h
# (macros expanded, so that each struct is mutated alone) with the member
#   pad:    moved (char braid_mut_pad[8] inserted before it): test_abi must fail naming it,
#   width:  resized (another type width): test_abi must fail naming it,
#   rename: renamed (no counterpart in the header): abi_facts.c must not compile, naming it.
# See abi-mutate.awk. Per mutant only the generated abi_facts.c is compiled; test_abi.o is
# built once. The unmutated expanded header must pass first.
# Usage (repo root): tests/unit/test-abi-mutation.sh [--keep DIR]
#   --keep DIR  leave the mutants, their builds and outputs in DIR (must not exist)
# Internal: tests/unit/test-abi-mutation.sh --one DIR ID KIND STRUCT MEMBER NAMES
set -u
export LC_ALL=C # compiler messages in ASCII quotes
CC=${CC:-cc}
cflags=(-std=c11 -D_GNU_SOURCE -O0 -Wall -Wextra -Werror -Wno-unused-parameter -I.)
cmocka_libs=$(pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

# build DIR: abi_facts.c against DIR/nccl_net_abi.h, linked with test_abi.o, into DIR/test_abi
build() {
	"$CC" "${cflags[@]}" -I"$1" -c "$work/abi_facts.c" -o "$1/abi_facts.o" \
		>"$1/cc.log" 2>&1 &&
		"$CC" -o "$1/test_abi" "$work/test_abi.o" "$1/abi_facts.o" $cmocka_libs \
			>>"$1/cc.log" 2>&1
}

# one mutant; writes DIR/ID/result: "caught" or why not
one() {
	work=$1 id=$2 kind=$3 def=$4 member=$5 names=$6
	local d=$work/$id res
	mkdir "$d" && mv "$work/$id.h" "$d/nccl_net_abi.h" || exit 1
	if [ "$kind" = rename ]; then
		if build "$d"; then
			res="MISSED: abi_facts.c compiled without $def.$member"
		elif grep -q "no member named '$member'" "$d/cc.log" &&
		     grep -q "nccl-net-abi-v8-v12.txt:[0-9]" "$d/cc.log"; then
			res=caught
		else
			res="MISSED: the build failed, but not on $member ($id/cc.log)"
		fi
	elif ! build "$d"; then
		res="ERROR: the mutant does not compile ($id/cc.log)"
	elif "$d/test_abi" >"$d/out" 2>&1; then
		res="MISSED: test_abi passed"
	elif grep -qE "^[^ ]*:[0-9]+: ($names)\\.$member: " "$d/out"; then
		res=caught
	else
		res="MISSED: test_abi failed without naming $def.$member ($id/out)"
	fi
	echo "$res" >"$d/result"
}

if [ "${1:-}" = --one ]; then
	shift
	one "$@"
	exit 0
fi

keep=
if [ "${1:-}" = --keep ]; then
	keep=$2
	mkdir "$keep" || exit 1
	work=$(cd "$keep" && pwd)
else
	work=$(mktemp -d /tmp/braid-abi-mutation.XXXXXX)
	trap 'rm -rf "$work"' EXIT
fi
start=$(date +%s.%N)
facts=tests/unit/nccl-net-abi-v8-v12.txt

awk -v out_name="$work/abi_facts.c" -f tests/unit/gen-abi-facts.awk "$facts" \
	>"$work/abi_facts.c" || exit 1
"$CC" "${cflags[@]}" -Iinclude $(pkg-config --cflags cmocka 2>/dev/null) -c tests/unit/test_abi.c \
	-o "$work/test_abi.o" || exit 1
# The header with its macros expanded: system includes kept as they are.
{
	grep '^#include <' include/nccl_net_abi.h
	grep -v '^#include <' include/nccl_net_abi.h | "$CC" -std=c11 -E -P -x c -
} >"$work/expanded.h" || exit 1

mkdir "$work/unmutated" && cp "$work/expanded.h" "$work/unmutated/nccl_net_abi.h"
if ! build "$work/unmutated" || ! "$work/unmutated/test_abi" >"$work/unmutated/out" 2>&1; then
	cat "$work/unmutated/cc.log" "$work/unmutated/out" 2>/dev/null
	echo "FAIL: test_abi fails on the unmutated header with its macros expanded"
	exit 1
fi
grep '^abi: checked' "$work/unmutated/out"

awk -v outdir="$work" -f tests/unit/abi-mutate.awk "$facts" "$work/expanded.h" \
	>"$work/manifest" || exit 1
total=$(wc -l <"$work/manifest")
[ "$total" -gt 0 ] || { echo "FAIL: no mutants"; exit 1; }

jobs=${BRAID_TEST_JOBS:-$(nproc)}
while read -r id kind def member names; do
	printf '%s\0' "$work" "$id" "$kind" "$def" "$member" "$names"
done <"$work/manifest" | xargs -0 -n 6 -P "$jobs" "$0" --one

caught=0 missed=0
declare -A kinds kinds_caught
while read -r id kind def member names; do
	kinds[$kind]=$((${kinds[$kind]:-0} + 1))
	res=$(cat "$work/$id/result" 2>/dev/null || echo "ERROR: no result")
	if [ "$res" = caught ]; then
		caught=$((caught + 1))
		kinds_caught[$kind]=$((${kinds_caught[$kind]:-0} + 1))
	else
		missed=$((missed + 1))
		echo "$id $kind $def.$member: $res"
	fi
done <"$work/manifest"

structs=$(awk '{ print $3 }' "$work/manifest" | sort -u | wc -l)
members=$(awk '{ print $3 "." $4 }' "$work/manifest" | sort -u | wc -l)
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
for k in pad width rename; do
	printf '%-7s %d mutants, %d caught\n' "$k" "${kinds[$k]:-0}" "${kinds_caught[$k]:-0}"
done
echo "abi mutation: $total mutants of $members members of $structs structs" \
	"(every v8..v12 struct of $facts): $caught caught, $missed missed, ${secs}s, $jobs jobs"
if [ "$missed" -ne 0 ]; then
	[ -n "$keep" ] && echo "mutants, build logs and outputs: $keep/ID/" ||
		echo "to see the mutants, their build logs and outputs: $0 --keep DIR"
	exit 1
fi
