#!/usr/bin/env bash
# NCCL's loading rules and the exported symbols: the plugin is found by NCCL_NET_PLUGIN
# as a path, as NAME (libnccl-net-NAME.so) and unset (libnccl-net.so), and exports the
# five ncclNetPlugin_v8..v12 tables and no other symbol; NCCL 2.30's lookup order
# (v12 first, then v11 ...: tests/unit/load_plugin) finds v12 and initialises it; an
# unload without finalize leaves no link watcher's socket behind.
set -u
. "$(dirname "$0")/lib.sh"
export BRAID_BACKEND=ofi BRAID_OFI_PROVIDER='tcp;ofi_rxm' BRAID_SOCKET_IFNAME=lo FI_TCP_IFACE=lo

exports=$(nm -D --defined-only "$PLUGIN_SO" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' |
	grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' | sort | tr '\n' ' ')
want="ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v8 ncclNetPlugin_v9 "
echo "exported: $exports"
[ "$exports" = "$want" ] || die "the plugin must export exactly: $want"

[ -L "$BUILD/libnccl-net.so" ] || [ -f "$BUILD/libnccl-net.so" ] ||
	die "$BUILD/libnccl-net.so (the name NCCL loads with NCCL_NET_PLUGIN unset) is missing"

echo "== NCCL_NET_PLUGIN=<full path>"
"$CONF_BIN" --plugin "$(cd "$BUILD" && pwd)/libnccl-net-braid.so" --scenario props || die "by path"
echo "== NCCL_NET_PLUGIN=braid (libnccl-net-braid.so through the loader's path)"
LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$CONF_BIN" --plugin braid --scenario props || die "by name"
echo "== NCCL_NET_PLUGIN unset (libnccl-net.so)"
LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$CONF_BIN" --plugin "" --scenario props || die "unset"
echo "== NCCL 2.30's lookup order: v12 first"
loader=$BUILD/tests/unit/load_plugin
[ -x "$loader" ] || die "$loader is missing: run make first"
out=$("$loader" "$PLUGIN_SO" 2>&1)
rc=$?
echo "$out" | head -3
echo "$out" | grep -qx 'found ncclNetPlugin_v12' || die "NCCL 2.30 would not find v12 first"
[ "$rc" -eq 0 ] && echo "$out" | grep -qx 'init: 0' || die "init through v12 failed (rc $rc)"
# ncclNet v8 to v10 have no finalize: a process that unloads the plugin without it (the
# loader's --dlclose) holds one rtnetlink link listener fewer afterwards: net_ofi's link
# watcher's (it watches lo here; where rtnetlink is refused it never ran: not checked)
echo "== dlclose without finalize"
# (no finalize frees nothing: under ASan that is no leak of the plugin's to report)
out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$loader" "$PLUGIN_SO" --dlclose 2>&1)
rc=$?
line=$(echo "$out" | grep '^link listeners')
echo "$line"
read -r before after < <(echo "$line" | sed -E 's/.*after init: ([0-9]+), after dlclose: ([0-9]+).*/\1 \2/')
[ -n "$line" ] && [ "$rc" -ne 2 ] || die "the loader's --dlclose did not run (rc $rc)"
if [ "$before" = 0 ]; then
	echo "no link watcher ran (no rtnetlink here?): nothing to check"
elif [ "$after" -ne $((before - 1)) ]; then
	die "dlclose left the link watcher's rtnetlink socket open ($before before, $after after)"
fi
echo "loader: all passed"
