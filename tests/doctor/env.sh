#!/usr/bin/env bash
# braid doctor's environment checks: NCCL variables that make NCCL bypass braid or name
# devices and interfaces this host (a fixture root) does not have.
# shellcheck source=tests/doctor/lib.sh
. "$(dirname "$0")/lib.sh"
ROOT=$HOSTS/roce-good # mlx5_0; interfaces eth2 and lo

doc --root "$ROOT" --only env
for v in NCCL_NET NCCL_IB_DISABLE NCCL_IB_HCA NCCL_SOCKET_IFNAME; do
	status "env.$v" PASS "nothing set"
done
rc 0 "nothing set"

NCCL_NET=Socket doc --root "$ROOT" --only env
status env.NCCL_NET FAIL "NCCL_NET=Socket"
rc 2 "NCCL_NET=Socket"
NCCL_NET=braid doc --root "$ROOT" --only env
status env.NCCL_NET PASS "NCCL_NET=braid"

NCCL_IB_DISABLE=1 doc --root "$ROOT" --only env
status env.NCCL_IB_DISABLE WARN "NCCL_IB_DISABLE=1"
rc 1 "NCCL_IB_DISABLE=1"

NCCL_IB_HCA=mlx5_9 doc --root "$ROOT" --only env
status env.NCCL_IB_HCA FAIL "NCCL_IB_HCA naming a missing device"
has 'missing: mlx5_9' "NCCL_IB_HCA: the missing name"
rc 2 "NCCL_IB_HCA=mlx5_9"
NCCL_IB_HCA="=mlx5" doc --root "$ROOT" --only env
status env.NCCL_IB_HCA FAIL "NCCL_IB_HCA==mlx5: exact names, mlx5 is only a prefix"
NCCL_IB_HCA=mlx5_0:1,mlx5_3 doc --root "$ROOT" --only env
status env.NCCL_IB_HCA WARN "NCCL_IB_HCA with one device missing"
rc 1 "NCCL_IB_HCA=mlx5_0:1,mlx5_3"
NCCL_IB_HCA=mlx5 doc --root "$ROOT" --only env
status env.NCCL_IB_HCA PASS "NCCL_IB_HCA=mlx5, a prefix"

NCCL_SOCKET_IFNAME=ens9 doc --root "$ROOT" --only env
status env.NCCL_SOCKET_IFNAME FAIL "NCCL_SOCKET_IFNAME naming a missing interface"
rc 2 "NCCL_SOCKET_IFNAME=ens9"
NCCL_SOCKET_IFNAME=eth doc --root "$ROOT" --only env
status env.NCCL_SOCKET_IFNAME PASS "NCCL_SOCKET_IFNAME=eth, a prefix of eth2"

# NCCL 2.28.0-2.30.2 unload a named plugin with the last communicator and forget its name
# (docs/troubleshooting.md): said where it applies, from the NCCL on the library path
# (a stand-in libnccl.so.2 that answers ncclGetVersion)
stub_nccl() { # CODE: a libnccl.so.2 of that version in $T/nccl-CODE
	mkdir -p "$T/nccl-$1"
	printf 'int ncclGetVersion(int *v) { *v = %s; return 0; }\n' "$1" |
		cc -shared -fPIC -x c - -o "$T/nccl-$1/libnccl.so.2"
}
for v in 22809 23003; do stub_nccl $v; done
NCCL_NET_PLUGIN=braid LD_LIBRARY_PATH=$T/nccl-22809 doc --root "$ROOT" --only env
status env.NCCL_NET_PLUGIN_REF_COUNT WARN "NCCL 2.28.9 with NCCL_NET_PLUGIN=braid"
has 'export NCCL_NET_PLUGIN_REF_COUNT=1' "the fix named"
rc 1 "NCCL 2.28.9, NCCL_NET_PLUGIN=braid"
NCCL_NET_PLUGIN=braid NCCL_NET_PLUGIN_REF_COUNT=1 LD_LIBRARY_PATH=$T/nccl-22809 \
	doc --root "$ROOT" --only env
status env.NCCL_NET_PLUGIN_REF_COUNT PASS "NCCL 2.28.9 with NCCL_NET_PLUGIN_REF_COUNT=1"
NCCL_NET_PLUGIN=braid LD_LIBRARY_PATH=$T/nccl-23003 doc --root "$ROOT" --only env
has_not 'env.NCCL_NET_PLUGIN_REF_COUNT' "NCCL 2.30.3: not listed"
LD_LIBRARY_PATH=$T/nccl-22809 doc --root "$ROOT" --only env
has_not 'env.NCCL_NET_PLUGIN_REF_COUNT' "NCCL_NET_PLUGIN unset (libnccl-net.so, the name NCCL falls back to): not listed"

# NCCL_IB_* variables of NCCL's IB transport (plugin/ncclib_env.c): each one set is listed
# with what braid does with it, as the plugin says at init; unset ones are not listed.
doc --root "$ROOT" --only env
has_not 'env.NCCL_IB_PKEY' "NCCL_IB_PKEY unset: not listed"
NCCL_IB_PKEY=1 doc --root "$ROOT" --only env
status env.NCCL_IB_PKEY PASS "NCCL_IB_PKEY, honoured (BRAID_IB_PKEY)"
has 'BRAID_IB_PKEY' "NCCL_IB_PKEY: braid's knob named"
rc 0 "NCCL_IB_PKEY=1"
NCCL_IB_ROUTABLE_FLID_GID_INDEX=2 doc --root "$ROOT" --only env
status env.NCCL_IB_ROUTABLE_FLID_GID_INDEX WARN "NCCL_IB_ROUTABLE_FLID_GID_INDEX, not honoured and it changes behaviour"
rc 1 "NCCL_IB_ROUTABLE_FLID_GID_INDEX=2"
NCCL_IB_DISABLE=1 NCCL_IB_HCA=mlx5 doc --root "$ROOT" --only env
[ "$(grep -c 'env.NCCL_IB_DISABLE' "$OUT")" = 1 ] && [ "$(grep -c 'env.NCCL_IB_HCA' "$OUT")" = 1 ] &&
	pass "NCCL_IB_DISABLE and NCCL_IB_HCA: one line each (their own checks)" ||
	{ fail "NCCL_IB_DISABLE or NCCL_IB_HCA listed twice:"; show; }
NCCL_IB_USE_INLINE=1 NCCL_IB_FIFO_TC=98 doc --root "$ROOT" --only env
status env.NCCL_IB_USE_INLINE PASS "NCCL_IB_USE_INLINE, honoured (BRAID_IB_USE_INLINE)"
status env.NCCL_IB_FIFO_TC PASS "NCCL_IB_FIFO_TC, honoured (BRAID_IB_FIFO_TC)"
NCCL_IB_OOO_RQ=1 doc --root "$ROOT" --only env
status env.NCCL_IB_OOO_RQ INFO "NCCL_IB_OOO_RQ, not read"
rc 0 "NCCL_IB_OOO_RQ=1"
finish
