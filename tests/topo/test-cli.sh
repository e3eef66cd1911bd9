#!/usr/bin/env bash
# `braid topo` on every fixture: exit status, sections, the warnings each should print,
# valid JSON with the documented keys, usage errors; then the devices the plugin shows
# NCCL (over libfabric's tcp provider, over softverbs with and without BRAID_MERGE, a bad
# BRAID_MERGE, --no-plugin, --api, --xml reaching the plugin, init/finalize balanced).
# Uses $BUILD/braid when it has the topo command, else the stand-alone driver
# $BUILD/tests/topo/braid-topo (which cannot load the plugin: the device checks skip).
set -u
BUILD=${BUILD:-build}
dir=tests/topo
if [ -x "$BUILD/braid" ] && "$BUILD/braid" topo --help >/dev/null 2>&1; then
	cmd=("$BUILD/braid" topo)
elif [ -x "$BUILD/tests/topo/braid-topo" ]; then
	cmd=("$BUILD/tests/topo/braid-topo")
else
	echo "no braid topo binary in $BUILD (build it with make)"
	exit 77
fi
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # description, then a command that must succeed
	local what=$1
	shift
	if ! "$@"; then
		echo "FAIL: $what"
		fails=$((fails + 1))
	fi
}

# fixture, number of WARNING lines, then strings the human output must contain
expect() {
	local xml=$1 nwarn=$2 out
	shift 2
	out=$("${cmd[@]}" --xml "$dir/$xml" 2>"$tmp/err")
	check "$xml: exit 0" test $? -eq 0
	check "$xml: nothing on stderr" test ! -s "$tmp/err"
	for s in "GPUs (" "NICs (" "GPU-to-rail map" "warnings (" "NCCL devices"; do
		check "$xml: section '$s'" grep -qF "$s" <<<"$out"
	done
	check "$xml: $nwarn warnings" test "$(grep -c '^WARNING: ' <<<"$out")" -eq "$nwarn"
	for s in "$@"; do
		check "$xml: contains '$s'" grep -qF -- "$s" <<<"$out"
	done
	"${cmd[@]}" --json --xml "$dir/$xml" >"$tmp/out.json"
	check "$xml --json: exit 0" test $? -eq 0
	check "$xml --json: valid, documented keys" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "braid-topo/1"
for k in ("source", "gpus", "nics", "rails", "paths", "warnings", "notes", "plugin",
          "devices"):
    assert k in d, k
pl = d["plugin"]
assert set(pl) == {"status", "path", "api", "merge", "reason", "warnings"}, pl
assert pl["status"] in ("ok", "failed", "not_loaded", "unavailable"), pl
assert (d["devices"] is None) == (pl["status"] != "ok"), d["devices"]
assert (pl["reason"] is None) == (pl["status"] == "ok"), pl
assert len(d["warnings"]) == int(sys.argv[2])
for g in d["gpus"]:
    assert set(g) == {"index", "bus_id", "osdev", "cuda_index", "cuda_index_guessed",
                      "model", "link_gbytes", "numa_node", "rail"}
for n in d["nics"]:
    assert set(n) == {"index", "name", "kind", "rdma", "netdev", "bus_id", "pci_path",
                      "model", "link_gbytes", "numa_node", "rail"}
    assert n["kind"] in ("verbs", "EFA", "netdev")
for p in d["paths"]:
    assert p["path"] in ("PIX", "PXB", "PHB", "NODE", "SYS")
assert len(d["paths"]) == len(d["gpus"]) * len(d["nics"])
' "$tmp/out.json" "$nwarn"
}

expect 8gpu-nic-per-pair.xml 0 "0000:13:00.0 cuda0   rail 0   mlx5_0 PIX/4" \
	"in no rail: eno1, mlx5_4"
expect 8gpu-4efa-per-gpu.xml 0 \
	"rail 7   rdmap196s0 PIX/4, rdmap197s0 PIX/4, rdmap198s0 PIX/4, rdmap199s0 PIX/4"
expect 2socket-remote-nics.xml 7 "rail 0   mlx5_0 SYS/10, mlx5_1 SYS/10" \
	"WARNING: rail 0 mixes NIC PCIe link speeds"
expect no-nic.xml 1 "WARNING: no NIC found at all"
expect no-gpu.xml 0 "note: no GPU found"
expect no-pci.xml 1 "note: hwloc saw no PCI devices"
expect hwloc-2socket-3gpu-mlx5.xml 1 "0000:03:00.0         rail 0   mlx5_0 SYS/8"

# This machine: works whatever it has.
"${cmd[@]}" >"$tmp/out" 2>"$tmp/err"
check "this machine: exit 0" test $? -eq 0
check "this machine: source" grep -q '^topology: this machine' "$tmp/out"

# $HWLOC_XMLFILE
out=$(HWLOC_XMLFILE=$dir/no-gpu.xml "${cmd[@]}")
check "HWLOC_XMLFILE honoured" grep -q "topology: $dir/no-gpu.xml" <<<"$out"

# Usage and errors: exit 1, a message on stderr, nothing on stdout.
"${cmd[@]}" --help >"$tmp/out"
check "--help exit 0" test $? -eq 0
check "--help usage" grep -q '^usage: braid topo' "$tmp/out"
for args in "--bogus" "--xml" "--xml $dir/malformed.xml" "--xml $dir/missing.xml" \
	"--xml $dir/not-a-topology.xml"; do
	# shellcheck disable=SC2086
	"${cmd[@]}" $args >"$tmp/out" 2>"$tmp/err"
	check "'$args': exit 1" test $? -eq 1
	check "'$args': message" grep -q '^braid topo: ' "$tmp/err"
	check "'$args': no stdout" test ! -s "$tmp/out"
done

# ---- the devices the plugin shows NCCL
# The section quoted from the human output: from its header to the end.
section() { sed -n '/^NCCL devices/,/^$/p' "$1"; }
# run ENV... -- ARGS: the command with ENV, human output in $tmp/out, JSON in $tmp/out.json,
# stderr of both in $tmp/err; $rc_h and $rc_j their exit statuses.
run() {
	local envs=()
	while [ "$1" != "--" ]; do
		envs+=("$1")
		shift
	done
	shift
	env "${envs[@]}" "${cmd[@]}" "$@" >"$tmp/out" 2>"$tmp/err"
	rc_h=$?
	env "${envs[@]}" "${cmd[@]}" --json "$@" >"$tmp/out.json" 2>>"$tmp/err"
	rc_j=$?
}
# jcheck description 'python expression over d (the JSON), true when right'
jcheck() {
	check "$1" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
devs = d["devices"] or []
names = [x["name"] for x in devs]
ok = eval("(" + sys.argv[2] + ")")
if not ok:
    print("  plugin:", d["plugin"], "devices:", d["devices"])
sys.exit(0 if ok else 1)
' "$tmp/out.json" "$2"
}

if [ "${cmd[0]}" != "$BUILD/braid" ]; then
	echo "skip: the device checks need $BUILD/braid (the stand-alone driver cannot load the plugin)"
	"${cmd[@]}" >"$tmp/out"
	check "stand-alone: says it cannot load the plugin" \
		grep -q '^  none: this build of braid topo cannot load the plugin' "$tmp/out"
else
	ofi=(BRAID_BACKEND=ofi "BRAID_OFI_PROVIDER=tcp;ofi_rxm" BRAID_SOCKET_IFNAME=lo)

	# (1) libfabric's tcp provider: at least one device; its SLOW PATH WARN goes into the
	# section, not stderr.
	run "${ofi[@]}" --
	check "ofi tcp: exit 0" test "$rc_h" -eq 0 -a "$rc_j" -eq 0
	check "ofi tcp: nothing on stderr" test ! -s "$tmp/err"
	check "ofi tcp: header with a count and the default BRAID_MERGE" grep -qE \
		'^NCCL devices \([1-9][0-9]*\) from the plugin as ncclNet v12, BRAID_MERGE=auto \(none under ncclNet v9\+\)$' \
		"$tmp/out"
	check "ofi tcp: device 0 listed with a speed and vProps" \
		grep -qE '^  0 +[^ ]+ +[0-9.]+ Gb/s +\{0\}$' "$tmp/out"
	check "ofi tcp: the plugin's WARN quoted" grep -q '^  plugin WARN: SLOW PATH' "$tmp/out"
	jcheck "ofi tcp --json: ok, at least one device" \
		'd["plugin"]["status"] == "ok" and len(devs) >= 1 and d["plugin"]["api"] == 12
and d["plugin"]["merge"] == "auto" and all(x["speed_mbps"] > 0 for x in devs)
and set(devs[0]) == {"index", "name", "speed_mbps", "port", "pci_path", "vprops", "rail_id",
                     "plane_id"}
and devs[0]["vprops"] == [0]'

	# (4) --no-plugin: the same environment, no section, and "skipped" in JSON.
	run "${ofi[@]}" -- --no-plugin
	check "--no-plugin: exit 0" test "$rc_h" -eq 0 -a "$rc_j" -eq 0
	check "--no-plugin: no devices section" bash -c "! grep -q 'NCCL devices' '$tmp/out'"
	check "--no-plugin: topology still there" grep -q '^warnings (' "$tmp/out"
	jcheck "--no-plugin --json: skipped" \
		'd["plugin"]["status"] == "skipped" and d["devices"] is None'

	# --api 8: v8's table, no vProps column, auto means rail.
	run "${ofi[@]}" -- --api 8
	check "--api 8: header" grep -q \
		'^NCCL devices ([0-9]*) from the plugin as ncclNet v8, BRAID_MERGE=auto (rail under ncclNet v8)$' \
		"$tmp/out"
	check "--api 8: no vProps column" bash -c "! grep -q 'vProps' '$tmp/out'"
	check "--api 8: device 0 without vProps" grep -qE '^  0 +[^ ]+ +[0-9.]+ Gb/s$' "$tmp/out"
	jcheck "--api 8 --json: vprops null" \
		'd["plugin"]["api"] == 8 and devs and all(x["vprops"] is None for x in devs)'

	# init/finalize balanced: v12 (the default) finalizes once (the plugin's summary, logged when its
	# last reference goes, with NCCL_DEBUG=INFO); v8 has no finalize.
	NCCL_DEBUG=INFO env "${ofi[@]}" "${cmd[@]}" >"$tmp/out" 2>"$tmp/err"
	check "v12: finalize once" test "$(grep -c 'summary: backend' "$tmp/err")" -eq 1
	check "v12: no unmatched finalize" bash -c "! grep -q 'without a matching init' '$tmp/err'"
	NCCL_DEBUG=INFO env "${ofi[@]}" "${cmd[@]}" --api 8 >"$tmp/out" 2>"$tmp/err"
	check "v8: no finalize" test "$(grep -c 'summary: backend' "$tmp/err")" -eq 0

	# A plugin that is not there: said in the section, exit 0.
	run -- --plugin "$tmp/no-such-plugin.so"
	check "missing plugin: exit 0" test "$rc_h" -eq 0 -a "$rc_j" -eq 0
	check "missing plugin: said" grep -q '^  none: the plugin could not be loaded: dlopen' \
		"$tmp/out"
	jcheck "missing plugin --json: not_loaded" 'd["plugin"]["status"] == "not_loaded"'

	# Bad --api: a usage error.
	for a in 7 13 x ""; do
		"${cmd[@]}" --api "$a" >"$tmp/out" 2>"$tmp/err"
		check "--api '$a': exit 1" test $? -eq 1
		check "--api '$a': message" grep -q '^braid topo: --api' "$tmp/err"
	done
	"${cmd[@]}" --api >"$tmp/out" 2>"$tmp/err"
	check "--api without a value: exit 1" test $? -eq 1

	# (2), (3) over softverbs: two RoCE NICs of 100 Gb/s.
	sv=$(cd "$BUILD/softverbs" 2>/dev/null && pwd)
	if [ -z "$sv" ] || [ ! -f "$sv/libibverbs.so.1" ]; then
		echo "skip: softverbs checks ($BUILD/softverbs/libibverbs.so.1 missing: run make)"
	else
		mkdir "$tmp/fabric"
		ib=(LD_LIBRARY_PATH="$sv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
			SOFTVERBS_FABRIC="$tmp/fabric" "SOFTVERBS_DEVICES=svroce0:roce:1,svroce1:roce:1"
			BRAID_BACKEND=ib "BRAID_IB_HCA==svroce0,svroce1")

		run "${ib[@]}" BRAID_MERGE=none --
		check "MERGE=none: exit 0" test "$rc_h" -eq 0 -a "$rc_j" -eq 0
		check "MERGE=none: header" grep -q \
			'^NCCL devices (2) from the plugin as ncclNet v12, BRAID_MERGE=none$' "$tmp/out"
		check "MERGE=none: svroce0" grep -qE '^  0 +svroce0 +[0-9.]+ Gb/s +\{0\}$' "$tmp/out"
		check "MERGE=none: svroce1" grep -qE '^  1 +svroce1 +[0-9.]+ Gb/s +\{1\}$' "$tmp/out"
		jcheck "MERGE=none --json: two devices" \
			'names == ["svroce0", "svroce1"] and d["plugin"]["merge"] == "none"'
		speeds=$(python3 -c 'import json, sys
print(" ".join(str(x["speed_mbps"]) for x in json.load(open(sys.argv[1]))["devices"] or []))' \
			"$tmp/out.json")
		read -r s0 s1 <<<"$speeds"

		run "${ib[@]}" BRAID_MERGE=svroce0+svroce1 --
		check "MERGE=a+b: exit 0" test "$rc_h" -eq 0 -a "$rc_j" -eq 0
		check "MERGE=a+b: nothing on stderr" test ! -s "$tmp/err"
		check "MERGE=a+b: header" grep -q \
			'^NCCL devices (1) from the plugin as ncclNet v12, BRAID_MERGE=svroce0+svroce1$' \
			"$tmp/out"
		check "MERGE=a+b: one device" test "$(section "$tmp/out" | grep -cE '^  [0-9]+ ')" -eq 1
		check "MERGE=a+b: fused, vProps one NIC to NCCL" \
			grep -qE '^  0 +svroce0\+svroce1 +[0-9.]+ Gb/s +\{0\}$' "$tmp/out"
		jcheck "MERGE=a+b --json: one device, speed the sum ($s0 + $s1)" \
			"names == ['svroce0+svroce1'] and ${s0:-0} > 0 and ${s1:-0} > 0
and devs[0]['speed_mbps'] == ${s0:-0} + ${s1:-0} and devs[0]['vprops'] == [0]"

		# (3) A bad BRAID_MERGE: init fails, the section says so with the plugin's
		# reason, exit 0.
		run "${ib[@]}" BRAID_MERGE=svroce0+nosuch --
		check "bad MERGE: exit 0" test "$rc_h" -eq 0 -a "$rc_j" -eq 0
		check "bad MERGE: nothing on stderr" test ! -s "$tmp/err"
		check "bad MERGE: could not initialise, names BRAID_MERGE" grep -qE \
			'^  none: the plugin could not initialise: init returned ncclInvalidUsage: BRAID_MERGE="svroce0\+nosuch": .*nosuch' \
			"$tmp/out"
		check "bad MERGE: one line" test "$(section "$tmp/out" | grep -c '^  none')" -eq 1
		check "bad MERGE: topology still there" grep -q '^GPU-to-rail map' "$tmp/out"
		jcheck "bad MERGE --json: failed with the reason" \
			'd["plugin"]["status"] == "failed" and "BRAID_MERGE" in d["plugin"]["reason"]
and d["devices"] is None and d["gpus"] is not None'

		# --xml reaches the plugin (HWLOC_XMLFILE): the fixture's 8 GPUs show in its
		# GPUDirect WARN; this machine's topology gives another count or none.
		run "${ib[@]}" -- --xml "$dir/8gpu-nic-per-pair.xml"
		check "--xml: the plugin read the fixture" \
			grep -q '^  plugin WARN: GPUDirect.*the topology has 8 GPU(s)' "$tmp/out"
		# railId and planeId (ncclNet v12): five softverbs NICs named as the fixture's,
		# on two hosts whose kernels named them in other orders (the -renamed fixture):
		# the NIC of each GPU pair gets that pair's rail on both; the storage NIC none.
		nics="SOFTVERBS_DEVICES=mlx5_0:roce:1,mlx5_1:roce:1,mlx5_2:roce:1,mlx5_3:roce:1,mlx5_4:roce:1"
		mlx=(LD_LIBRARY_PATH="$sv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
			SOFTVERBS_FABRIC="$tmp/fabric" "$nics" BRAID_BACKEND=ib BRAID_MERGE=none)
		run "${mlx[@]}" -- --xml "$dir/8gpu-nic-per-pair.xml"
		check "ids: exit 0" test "$rc_h" -eq 0 -a "$rc_j" -eq 0
		check "ids: header" grep -q '^NCCL rail and plane ids (ncclNet v12; - undefined)$' "$tmp/out"
		for want in "0 mlx5_0 0 -" "1 mlx5_1 1 -" "2 mlx5_2 2 -" "3 mlx5_3 3 -" "4 mlx5_4 - -"; do
			check "ids: '$want'" bash -c "sed -n '/^NCCL rail and plane ids/,\$p' '$tmp/out' |
				awk '{ \$1 = \$1; print }' | grep -qx '$want'"
		done
		jcheck "ids --json: rail_id by GPU pair, mlx5_4 none, no planes" \
			'[x["rail_id"] for x in devs] == [0, 1, 2, 3, None]
and all(x["plane_id"] is None for x in devs)'
		run "${mlx[@]}" -- --xml "$dir/8gpu-nic-per-pair-renamed.xml"
		# NCCL_IB_DEVICE_PCI_ORDER (default 1): devices numbered by PCI slot, so device i
		# is the same slot, with the same rail, on both hosts, whatever their names.
		jcheck "ids, other host (NICs named in reverse): the same rail per PCI slot" \
			'[(x["name"], x["rail_id"]) for x in devs] == [("mlx5_3", 0), ("mlx5_2", 1),
("mlx5_1", 2), ("mlx5_0", 3), ("mlx5_4", None)]'
		# NCCL_IB_HCA's hca:port:rail:plane: the list's rails win and are the only ones
		run "${mlx[@]}" "NCCL_IB_HCA==mlx5_0:1:7:2,mlx5_1:1::3,mlx5_2,mlx5_3" -- \
			--xml "$dir/8gpu-nic-per-pair.xml"
		jcheck "ids from NCCL_IB_HCA: rail 7 plane 2, plane 3, then none" \
			'[(x["name"], x["rail_id"], x["plane_id"]) for x in devs] == [("mlx5_0", 7, 2),
("mlx5_1", None, 3), ("mlx5_2", None, None), ("mlx5_3", None, None)]'
		check "ids from NCCL_IB_HCA: human" bash -c "sed -n '/^NCCL rail and plane ids/,\$p' \
			'$tmp/out' | awk '{ \$1 = \$1; print }' | grep -qx '0 mlx5_0 7 2'"
		run "${mlx[@]}" -- --xml "$dir/8gpu-nic-per-pair.xml" --api 11
		check "ids under v11: none, said why" grep -q \
			'^  none: ncclNet v11 has no railId or planeId' "$tmp/out"
		jcheck "ids under v11 --json: null" 'all(x["rail_id"] is None for x in devs)'

		run "${ib[@]}" --
		check "no --xml: the plugin read this machine" \
			bash -c "! grep -q 'the topology has 8 GPU(s)' '$tmp/out'"
	fi
fi

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all braid topo checks passed (${cmd[*]})"
