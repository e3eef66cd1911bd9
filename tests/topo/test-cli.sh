#!/usr/bin/env bash
# `braid topo` on every fixture: exit status, sections, the warnings each should print,
# valid JSON with the documented keys, usage errors. Uses $BUILD/braid when it has the
# topo command, else the stand-alone driver $BUILD/tests/topo/braid-topo.
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
	for s in "GPUs (" "NICs (" "GPU-to-rail map" "warnings ("; do
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
for k in ("source", "gpus", "nics", "rails", "paths", "warnings", "notes"):
    assert k in d, k
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

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all braid topo checks passed (${cmd[*]})"
