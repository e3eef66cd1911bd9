#!/usr/bin/env bash
# Fresh install: the .deb into a fresh Debian 12 root (debootstrap --variant=minbase,
# packaging/tests/rootfs.sh, cached outside the tree), with apt as a user would, then in
# that root: the ldconfig cache knows the plugin, NCCL_NET_PLUGIN=braid resolves it
# through the system library path (dlopen of the bare name, as NCCL), its init succeeds,
# braid version names the installed file, braid perf runs over tcp, the conformance
# quick scenarios (every one with BRAID_INSTALL_CONFORMANCE=all) and the loader's props
# pass against the installed .so, and with
# braid-default-plugin NCCL_NET_PLUGIN unset (libnccl-net.so) loads braid too.
# The test programs (load_plugin, conformance) are copied in; braid and the plugin are
# only the packaged ones. Uses the .deb of this pass (packaging/tests/deb.sh), building it
# when absent.
set -u
. "$(dirname "$0")/lib.sh"
skip_sanitizer_build
need_root "the fresh-install test"
for t in debootstrap chroot dpkg-architecture; do
	command -v $t >/dev/null || die "$t is missing (packaging/debian-packages.txt)"
done
version=$(cat VERSION)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb="$BUILD/pkg/braid_${version}_$arch.deb"
def="$BUILD/pkg/braid-default-plugin_${version}_$arch.deb"
if [ ! -s "$deb" ] || [ ! -s "$def" ]; then
	make --no-print-directory BUILD="$BUILD" deb >"$BUILD/pkg-deb.log" 2>&1 || die "make deb failed"
fi
conf="$BUILD/tests/conformance/conformance"
loader="$BUILD/tests/unit/load_plugin"
[ -x "$conf" ] && [ -x "$loader" ] || die "$conf or $loader is missing: run make first"
tar=$(packaging/tests/rootfs.sh) || die "no Debian root (packaging/tests/rootfs.sh)"
cache=$(dirname "$tar")

root=$(mktemp -d /var/tmp/braid-root.XXXXXX)
mounts=()
cleanup() {
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null; done
	rm -rf --one-file-system "$root"
}
trap cleanup EXIT
mnt() { # mount args..., last one the target
	mount "$@" || die "mount $*"
	mounts+=("${!#}")
}
tar -C "$root" -xf "$tar" || die "cannot unpack $tar"
mnt -t proc proc "$root/proc"
mnt -t sysfs -o ro sysfs "$root/sys"
mnt --bind /dev "$root/dev"
mnt -t tmpfs -o size=256m tmpfs "$root/dev/shm"
mkdir -p "$cache/apt-archives/partial"
# downloaded packages are kept between runs: only the first one fetches them
mnt --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/opt/braid-test"
cp "$deb" "$def" "$conf" "$loader" "$root/opt/braid-test/"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
step() { echo; echo "== $*"; }

step "apt-get install ./$(basename "$deb") (Depends and Recommends from the mirror)"
in_root apt-get update -qq || die "apt-get update in the fresh root failed (network, mirror?)"
in_root apt-get install -y -q "/opt/braid-test/$(basename "$deb")" >"$root/apt.log" 2>&1 ||
	{ tail -n 20 "$root/apt.log"; die "apt-get install of the .deb failed"; }
grep -E '^(Setting up|Unpacking) ' "$root/apt.log" | sed 's/^/  /'
for p in braid libibverbs1 libfabric1; do
	in_root dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		die "$p is not installed in the fresh root"
done
[ -e "$root/usr/lib/$multiarch/libnccl-net.so" ] &&
	die "installing braid alone created libnccl-net.so (it belongs to braid-default-plugin)"

step "the ldconfig cache (the package's ldconfig trigger)"
in_root ldconfig -p | grep 'libnccl-net-braid\.so ' || die "ldconfig -p does not list libnccl-net-braid.so"

export_env="BRAID_BACKEND=ofi BRAID_OFI_PROVIDER=tcp;ofi_rxm BRAID_SOCKET_IFNAME=lo FI_TCP_IFACE=lo"
run() { in_root /usr/bin/env $export_env "$@"; }

step "NCCL_NET_PLUGIN=braid: dlopen(\"libnccl-net-braid.so\") through the system path, init"
run /opt/braid-test/load_plugin libnccl-net-braid.so >"$root/load.log" 2>&1 ||
	{ cat "$root/load.log"; die "load_plugin libnccl-net-braid.so failed in the fresh root"; }
tail -n 3 "$root/load.log"

step "braid --version, braid version"
out=$(run braid version) || { echo "$out"; die "braid version failed"; }
echo "$out"
head -n 1 <<<"$out" | grep -q -x "braid $version" || die "braid version does not say $version"
# /lib is /usr/lib in a merged-/usr root: compare the real files
loaded=$(sed -n 's/^plugin: //p' <<<"$out")
[ -n "$loaded" ] && [ "$(in_root readlink -f "$loaded")" = "/usr/lib/$multiarch/libnccl-net-braid.so" ] ||
	die "braid version did not load the installed /usr/lib/$multiarch/libnccl-net-braid.so"
run braid --version | head -n 1 | grep -q -x "braid $version" || die "braid --version"

step "man pages"
for page in "$BUILD"/man/*.1; do
	[ -s "$root/usr/share/man/man1/$(basename "$page").gz" ] || die "no installed man page $(basename "$page")"
done
ls "$root/usr/share/man/man1/" | grep "^braid" | tr "\n" " "; echo

step "braid perf over tcp;ofi_rxm (the installed braid and plugin)"
run braid perf --backend ofi --provider 'tcp;ofi_rxm' --max 1M --timeout 30 >"$root/perf.log" 2>&1 ||
	{ tail -n 20 "$root/perf.log"; die "braid perf failed in the fresh root"; }
grep -E "^# braid perf|data check" "$root/perf.log"
grep -q "^# braid perf .*libnccl-net-braid.so" "$root/perf.log" || die "braid perf did not name the plugin"

# quick in make test; BRAID_INSTALL_CONFORMANCE=all runs every scenario (about 80 s more)
scen=${BRAID_INSTALL_CONFORMANCE:-quick}
scen_args=(--scenario "$scen")
[ "$scen" = all ] && scen_args=()
step "conformance ($scen scenarios, props) against the installed plugin, as NCCL_NET_PLUGIN=braid"
run /opt/braid-test/conformance --plugin braid "${scen_args[@]}" >"$root/conf.log" 2>&1 ||
	{ tail -n 30 "$root/conf.log"; die "conformance --plugin braid ${scen_args[*]} failed"; }
grep -E "^(side [ab]|conformance):" "$root/conf.log"
run /opt/braid-test/conformance --plugin braid --scenario props >"$root/props.log" 2>&1 ||
	{ tail -n 20 "$root/props.log"; die "conformance --plugin braid --scenario props failed"; }
tail -n 1 "$root/props.log"

step "braid-default-plugin: NCCL_NET_PLUGIN unset loads libnccl-net.so = braid"
run /opt/braid-test/conformance --plugin "" --scenario props >/dev/null 2>&1 &&
	die "libnccl-net.so loaded before braid-default-plugin was installed"
in_root apt-get install -y -q "/opt/braid-test/$(basename "$def")" >"$root/apt2.log" 2>&1 ||
	{ tail -n 20 "$root/apt2.log"; die "apt-get install of braid-default-plugin failed"; }
run /opt/braid-test/conformance --plugin "" --scenario props >"$root/props2.log" 2>&1 ||
	{ tail -n 20 "$root/props2.log"; die "NCCL_NET_PLUGIN unset did not load braid"; }
tail -n 1 "$root/props2.log"
echo
echo "fresh install: all passed"
