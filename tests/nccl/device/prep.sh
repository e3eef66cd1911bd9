#!/usr/bin/env bash
# Fills .dev/ (at the repo root, ignored by git) with what tests/nccl/run.sh needs on a GPU
# machine that has CUDA, a driver and NCCL but no libfabric, hwloc or rdma-core: braid's
# build, those libraries from this machine, this folder's gpu-run.sh and a gpu-probe built
# here. See README.md beside it.
# Usage, from the repo root once `make BUILD=build` ran:  tests/nccl/device/prep.sh [BUILD]
set -euo pipefail
src=$(pwd)
here=$(cd "$(dirname "$0")" && pwd)
b=$src/${1:-build}
dev=$src/.dev
[ -e "$b/libnccl-net-braid.so" ] || { echo "prep.sh: no $b/libnccl-net-braid.so: make BUILD=${1:-build} first" >&2; exit 1; }
rm -rf "$dev"
mkdir -p "$dev/build/tests/nccl" "$dev/build/softverbs" "$dev/lib" "$dev/lib-tool" \
	"$dev/include" "$dev/bin" "$dev/fallback"
cp -L "$b/libnccl-net-braid.so" "$dev/build/"
cp -L "$b/braid" "$dev/build/"
cp -L "$b/tests/nccl/nccl_allreduce" "$dev/build/tests/nccl/"
[ ! -e "$b/tests/nccl/nccl_abort" ] || cp -L "$b/tests/nccl/nccl_abort" "$dev/build/tests/nccl/"
cp -L "$b/softverbs/libibverbs.so.1" "$b/softverbs/softverbs-stat" "$dev/build/softverbs/"
cp -L /usr/bin/fi_info "$dev/bin/"
cp -L /usr/local/cuda/include/nccl.h /usr/local/cuda/include/cuda_runtime_api.h "$dev/include/"
cp -L /usr/local/cuda/lib64/libcudart.so.13 "$dev/fallback/"
cc -O2 -Wall -Wextra -o "$dev/bin/gpu-probe" "$here/gpu-probe.c" -ldl
cp "$here/gpu-run.sh" "$here/README.md" "$dev/"

# skip: glibc, the C++/gcc runtimes, the loader, CUDA/NCCL (the remote's are used)
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libnccl|libcudart|libcuda)\.so'
closure() { # objects...: sonames=>paths of every non-skipped dependency
	for o in "$@"; do ldd "$o"; done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
		sort -u | while read -r name path; do
			[[ $name =~ $skip ]] || echo "$name $path"
		done
}
# runtime: plugin, libfabric (dlopened by net_ofi), libibverbs (dlopened by net_ib and
# by NCCL's own IB transport; rdma-core's, beside the softverbs one), fi_info
closure "$b/libnccl-net-braid.so" /usr/lib/x86_64-linux-gnu/libfabric.so.1 \
	/usr/lib/x86_64-linux-gnu/libibverbs.so.1 /usr/bin/fi_info > "$dev/rt.list"
echo "libfabric.so.1 /usr/lib/x86_64-linux-gnu/libfabric.so.1" >> "$dev/rt.list"
echo "libibverbs.so.1 /usr/lib/x86_64-linux-gnu/libibverbs.so.1" >> "$dev/rt.list"
sort -u "$dev/rt.list" | while read -r name path; do cp -L "$path" "$dev/lib/$name"; done
# the braid tool's extra libraries (only on the path for `braid version/doctor`)
closure "$b/braid" | while read -r name path; do
	[ -e "$dev/lib/$name" ] || cp -L "$path" "$dev/lib-tool/$name"
done
strip --strip-unneeded "$dev"/lib/*.so* "$dev"/lib-tool/*.so* 2>/dev/null || true
rm -f "$dev/rt.list"
chmod 755 "$dev"/lib/* "$dev"/lib-tool/* "$dev"/bin/* "$dev/build/braid" \
	"$dev/build/tests/nccl/nccl_allreduce" "$dev/build/softverbs/softverbs-stat"
{
	echo "commit $(git -C "$src" rev-parse HEAD)"
	echo "built $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), cc $(cc -dumpfullversion)"
	echo "nccl.h $(grep -m1 'define NCCL_VERSION_CODE' /usr/local/cuda/include/nccl.h | awk '{print $3}')"
	for f in tests/nccl/run.sh tests/nccl/nccl_allreduce.c; do
		echo "sha256 $(sha256sum "$src/$f" | cut -d' ' -f1) $f"
	done
} > "$dev/BUILT_FROM"
(cd "$dev" && find build lib lib-tool bin include fallback -type f -exec sha256sum {} + | sort -k2) > "$dev/SHA256SUMS"
du -sh "$dev"
