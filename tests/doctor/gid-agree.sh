#!/usr/bin/env bash
# braid doctor and the plugin name the same RoCE GID on the same host. The host is a
# fixture tree (tests/doctor/hosts/roce-good and variants made here); doctor reads it
# through --root, the plugin's net_ib through softverbs, which takes the port's GID table
# from the same files (SOFTVERBS_GID_ROOT) for a device of the same name. The plugin's
# pick is the "GID I" of its device INFO line (`braid topo` initialises it as NCCL
# would, NCCL_DEBUG=INFO prints it); doctor's is its "braid would pick GID index I" (or
# none: FAIL). The cases are those where doctor's old rule and net_ib's disagreed: an
# address range (BRAID_IB_ADDR_RANGE and NCCL_IB_ADDR_RANGE), a range no GID is in, and a
# port with RoCE v1 GIDs only.
# shellcheck source=tests/doctor/lib.sh
. "$(dirname "$0")/lib.sh"
SV_DIR=$BUILD/softverbs
if [ ! -f "$SV_DIR/libibverbs.so.1" ]; then
	echo "FAIL: $SV_DIR/libibverbs.so.1 is missing: make first"
	exit 1
fi
SV_DIR=$(cd "$SV_DIR" && pwd)
mkdir -p "$T/fabric"

# doctor's pick on ROOT with the environment given: an index, or "none"
doctor_pick() {
	local root=$1
	shift
	env "$@" "$BRAID" doctor --root "$root" --only gid >"$OUT" 2>&1
	sed -n 's/.*braid would pick GID index \([0-9]*\):.*/\1/p' "$OUT" | head -1 | grep . ||
		echo none
}
# the plugin's pick on ROOT's GID table: an index, or "none" (the port skipped)
plugin_pick() {
	local root=$1
	shift
	env LD_LIBRARY_PATH="$SV_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		SOFTVERBS_FABRIC="$T/fabric" SOFTVERBS_DEVICES=mlx5_0:roce:1 \
		SOFTVERBS_GID_ROOT="$root" BRAID_BACKEND=ib NCCL_DEBUG=INFO "$@" \
		"$BRAID" topo --xml "$TOPO/8gpu-nic-per-pair.xml" >"$T/plugin" 2>&1
	sed -n 's/.*ib: device [0-9]* = mlx5_0:1, RoCE,.* GID \([0-9]*\) .*/\1/p' "$T/plugin" |
		head -1 | grep . || echo none
}
# agree ROOT WANT WHAT ENV...: both pick WANT
agree() {
	local root=$1 want=$2 what=$3 d p
	shift 3
	d=$(doctor_pick "$root" "$@")
	p=$(plugin_pick "$root" "$@")
	if [ "$d" = "$want" ] && [ "$p" = "$want" ]; then
		pass "$what: doctor and the plugin both pick $want"
	else
		fail "$what: doctor picks $d, the plugin $p, expected $want; doctor said:"
		show
		sed 's/^/    plugin| /' "$T/plugin" | grep -E 'ib: |WARN' | head -8
	fi
}

agree "$HOSTS/roce-good" 3 "good RoCE host"

two_v4_host "$T/two-v4"
agree "$T/two-v4" 3 "two IPv4 addresses, no range"
agree "$T/two-v4" 5 "BRAID_IB_ADDR_RANGE=192.168.0.0/16" BRAID_IB_ADDR_RANGE=192.168.0.0/16
agree "$T/two-v4" 5 "NCCL_IB_ADDR_RANGE=192.168.0.0/16" NCCL_IB_ADDR_RANGE=192.168.0.0/16
agree "$T/two-v4" none "a range no GID is in" BRAID_IB_ADDR_RANGE=172.16.0.0/12

v1_only_host "$T/v1-only"
agree "$T/v1-only" 2 "RoCE v1 GIDs only"
finish
