#!/usr/bin/env bash
# The container recipe for real: podman builds packaging/container/Containerfile (build
# stage compiles braid's .deb on BASE, final stage is BASE + that .deb) with BASE a local
# Debian 12 image imported from the debootstrap root (packaging/tests/rootfs.sh; there is
# no outside registry), then runs in it: braid version (the installed plugin, found as
# NCCL finds it), braid perf over tcp, braid doctor's plugin check; and checks the final
# image has no compiler and no sources. runc, not crun, and ulimits inside the VM's hard
# limits (/work/shared/MACHINE-NOTES.md). The image layers are kept (podman's cache), so
# a rerun only recompiles. When this machine cannot run a container at all, it SKIPs with
# podman's reason: packaging/tests/install.sh is the same install test in a fresh root.
set -u
. "$(dirname "$0")/lib.sh"
skip_sanitizer_build
need_root "the container test (podman with runc)"
for t in podman runc; do command -v $t >/dev/null || die "$t is missing (packaging/debian-packages.txt)"; done
version=$(cat VERSION)
base=localhost/braid-test-base:bookworm
image=localhost/braid-test:latest
limits=(--ulimit nofile=1024:20000 --ulimit nproc=1000:1000)
podman_run() { podman --runtime runc run --rm --network=host "${limits[@]}" "$@"; }
step() { echo; echo "== $*"; }

tar=$(packaging/tests/rootfs.sh) || die "no Debian root (packaging/tests/rootfs.sh)"
# imported again only when the root was rebuilt since (the stamp beside it)
stamp="$(dirname "$tar")/.podman-imported"
if ! podman image exists "$base" || [ "$tar" -nt "$stamp" ]; then
	step "podman import $tar $base"
	podman import "$tar" "$base" >/dev/null || die "podman import failed"
	touch "$stamp"
fi
step "can this machine run a container?"
if ! out=$(podman_run "$base" /bin/true 2>&1); then
	echo "$out"
	skip "podman cannot run a container here: $(tail -n 1 <<<"$out") (packaging/tests/install.sh covers the install)"
fi
echo "yes (runc)"

rm -f "$BUILD/pkg-container-build.log"
step "podman build --build-arg BASE=$base -f packaging/container/Containerfile"
# The build stage is tagged too, so that its layers (apt's build dependencies) stay as
# the cache of the next run; the images this run replaces are removed after it.
build_image=localhost/braid-test-build:latest
old_ids=$(podman image inspect -f '{{.Id}}' "$image" "$build_image" 2>/dev/null)
start=$(date +%s)
for target in build final; do
	if [ $target = build ]; then args=(--target build -t "$build_image"); else args=(-t "$image"); fi
	podman --runtime runc build --network=host "${limits[@]}" --layers \
		-f packaging/container/Containerfile --build-arg BASE="$base" "${args[@]}" . \
		>>"$BUILD/pkg-container-build.log" 2>&1 ||
		{ tail -n 30 "$BUILD/pkg-container-build.log"; die "podman build failed ($BUILD/pkg-container-build.log)"; }
done
echo "built $image in $(($(date +%s) - start)) s"
new_ids=$(podman image inspect -f '{{.Id}}' "$image" "$build_image" 2>/dev/null)
for id in $old_ids; do
	grep -q -x "$id" <<<"$new_ids" || podman rmi "$id" >/dev/null 2>&1 || true
done

step "braid version in the container"
out=$(podman_run "$image" braid version 2>&1) || { echo "$out"; die "braid version failed in the container"; }
echo "$out"
head -n 1 <<<"$out" | grep -q -x "braid $version" || die "the container's braid is not $version"
grep -q -E '^plugin: (/usr)?/lib/[^/]+/libnccl-net-braid\.so$' <<<"$out" ||
	die "braid version did not load the installed plugin from the multiarch folder"

step "NCCL_NET_PLUGIN in the image, braid doctor's plugin check"
out=$(podman_run "$image" sh -c 'echo "NCCL_NET_PLUGIN=$NCCL_NET_PLUGIN"; braid doctor --only plugin' 2>&1)
echo "$out"
grep -q -x "NCCL_NET_PLUGIN=braid" <<<"$out" || die "the image does not set NCCL_NET_PLUGIN=braid"
grep -q -E '^PASS +plugin +NCCL_NET_PLUGIN=braid: NCCL would load .*libnccl-net-braid\.so' <<<"$out" ||
	die "braid doctor does not find the plugin NCCL would load"

step "braid perf over tcp;ofi_rxm in the container"
podman_run -e BRAID_SOCKET_IFNAME=lo -e FI_TCP_IFACE=lo "$image" \
	braid perf --backend ofi --provider 'tcp;ofi_rxm' --max 1M --timeout 30 >"$BUILD/pkg-container-perf.log" 2>&1 ||
	{ tail -n 20 "$BUILD/pkg-container-perf.log"; die "braid perf failed in the container"; }
grep -E '^# braid perf|^ +1048576 |data check' "$BUILD/pkg-container-perf.log"
grep -q 'data check: every verified iteration was right' "$BUILD/pkg-container-perf.log" || die "braid perf's data check"

step "the final image: no compiler, no sources"
out=$(podman_run "$image" sh -c 'for p in /usr/bin/cc /usr/bin/gcc /src; do [ -e $p ] && echo "present: $p"; done; true')
[ -z "$out" ] || die "the final image carries build stage files: $out"
echo "none"
echo
echo "container: all passed"
