#!/usr/bin/env bash
# braid doctor's plugin resolution (NCCL's rule, docs/doctor.md) against this build, the
# library checks against this machine, and the JSON document.
# shellcheck source=tests/doctor/lib.sh
. "$(dirname "$0")/lib.sh"
unset LD_LIBRARY_PATH
if ldconfig -p 2>/dev/null | grep -q 'libnccl-net-braid\.so\|libnccl-net\.so '; then
	echo "SKIP: a libnccl-net plugin is installed in the library path"
	exit 77
fi
B=$(cd "$BUILD" && pwd)

NCCL_NET_PLUGIN=braid doc --only plugin
status plugin FAIL "NCCL_NET_PLUGIN=braid, build/ not on LD_LIBRARY_PATH"
has 'tried braid, libnccl-net-braid.so' "NCCL_NET_PLUGIN=braid: both names NCCL tries"
has "fix: export NCCL_NET_PLUGIN=braid LD_LIBRARY_PATH=$B:" "the fix names the build"
rc 2 "plugin not found"

NCCL_NET_PLUGIN=braid LD_LIBRARY_PATH=$B doc --only plugin
status plugin PASS "NCCL_NET_PLUGIN=braid, build/ on LD_LIBRARY_PATH"
has "would load $B/libnccl-net-braid.so \\(as libnccl-net-braid.so\\), braid, exports v12 v11 v10 v9 v8" \
	"the file and the versions"
rc 0 "plugin found"

LD_LIBRARY_PATH=$B doc --only plugin
status plugin PASS "NCCL_NET_PLUGIN unset: libnccl-net.so, braid's link in build/"
NCCL_NET_PLUGIN=$B/libnccl-net-braid.so doc --only plugin
status plugin PASS "NCCL_NET_PLUGIN as a path"
NCCL_NET_PLUGIN=none LD_LIBRARY_PATH=$B doc --only plugin
status plugin FAIL "NCCL_NET_PLUGIN=none"
# a library that loads but is no net plugin (libjansson: present, since braid links it)
NCCL_NET_PLUGIN=libjansson.so.4 doc --only plugin
status plugin FAIL "NCCL_NET_PLUGIN naming a library that is no plugin"
has 'exports no ncclNetPlugin_v8..v12' "not a plugin: said so"

# libraries: as this machine has them
doc --only lib
for l in libibverbs.so.1:lib.ibverbs libfabric.so.1:lib.libfabric libnccl.so.2:lib.nccl; do
	if ldconfig -p | grep -q "${l%%:*} "; then
		status "${l#*:}" PASS "${l%%:*} is in the library path"
	else
		has "^(WARN|FAIL|INFO) +${l#*:} " "${l%%:*} is not in the library path"
	fi
done

# JSON: every check with id, status, message, fix; the summary and exit agree with rc
NCCL_NET=Socket doc --json --root "$HOSTS/memlock-64k" --only env,memlock
rc 2 "JSON run"
if jq -e '.braid_doctor == 1 and .exit == 2 and .summary.fail == 2 and
	(.checks | map(select(.id == "memlock"))[0] | .status == "FAIL" and (.fix | length > 0))
	and (.checks | all(has("id") and has("status") and has("message") and has("fix")))' \
	"$OUT" >/dev/null; then
	pass "JSON document"
else
	fail "JSON document:"
	show
fi
finish
