#!/usr/bin/env bash
# softverbs: the cmocka tests again under valgrind memcheck (leaks and
# uninitialised bytes on the wire). Plain builds only.
set -u
BUILD=${BUILD:-build}
dir=$BUILD/softverbs
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed"; exit 77; }
if readelf -d "$dir/libibverbs.so.1" | grep -q libasan; then
	echo "SKIP: ASan build (valgrind runs on plain builds)"
	exit 77
fi
rc=0
for t in test_sv_verbs test_sv_spec test_sv_fabric test_sv_wire test_sv_nccl_ib; do
	echo "== valgrind $t"
	# Forked children report the parent's inherited memory: keep them quiet.
	valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
		--child-silent-after-fork=yes "$dir/$t" || { echo "FAIL: $t"; rc=1; }
done
exit $rc
