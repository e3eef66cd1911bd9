#!/usr/bin/env bash
# Compile check: NVIDIA's nccl-tests (all_reduce_perf and its siblings), the benchmark
# users run through braid, build with MPI against the CUDA and NCCL of this machine, so
# that docs/install.md's cluster recipe keeps working. Not a GPU run: that is
# tests/nccl/run.sh. The tarball: NCCL_TESTS_TARBALL, default the vendored copy
# tests/nccl/vendor/nccl-tests-2.19.6.tar.gz (checked against its .sha256). SKIPs with the reason when
# the tarball, CUDA or NCCL, or MPI is absent; about a minute on 2 cores.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
MPI_HOME=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
tarball=${NCCL_TESTS_TARBALL:-tests/nccl/vendor/nccl-tests-2.19.6.tar.gz}
gencode=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
if [ "$(basename "$BUILD")" = build-san ]; then
	skip "nccl-tests is NVIDIA's code: compiled in the plain pass, not under SAN=1"
fi
[ -f "$tarball" ] || skip "no nccl-tests tarball at $tarball (set NCCL_TESTS_TARBALL)"
if [ -z "${NCCL_TESTS_TARBALL:-}" ]; then
	(cd tests/nccl/vendor && sha256sum --quiet -c nccl-tests-2.19.6.tar.gz.sha256) ||
		die "$tarball does not match tests/nccl/vendor/nccl-tests-2.19.6.tar.gz.sha256"
fi
[ -x "$CUDA_HOME/bin/nvcc" ] || skip "no CUDA: $CUDA_HOME/bin/nvcc is missing (set CUDA_HOME)"
[ -f "$CUDA_HOME/include/nccl.h" ] && ls "$CUDA_HOME"/lib64/libnccl.so* >/dev/null 2>&1 ||
	skip "no NCCL in $CUDA_HOME (include/nccl.h, lib64/libnccl.so)"
[ -f "$MPI_HOME/include/mpi.h" ] || skip "no MPI: $MPI_HOME/include/mpi.h is missing (libopenmpi-dev)"

out="$BUILD/nccl-tests"
rm -rf "$out" && mkdir -p "$out" || die "cannot create $out"
tar -C "$out" -xzf "$tarball" || die "cannot unpack $tarball"
src=$(dirname "$(find "$out" -maxdepth 2 -name Makefile -path '*nccl-tests*' | head -n 1)")
[ -d "$src/src" ] || die "$tarball has no nccl-tests/src"
echo "building $(basename "$tarball") in $src: MPI=1 CUDA_HOME=$CUDA_HOME NCCL_HOME=$CUDA_HOME $gencode"
start=$(date +%s)
make -C "$src" -j"$(nproc)" MPI=1 MPI_HOME="$MPI_HOME" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$CUDA_HOME" \
	NVCC_GENCODE="$gencode" src.build >"$out/build.log" 2>&1 ||
	{ tail -n 30 "$out/build.log"; die "nccl-tests did not build ($out/build.log)"; }
echo "built in $(($(date +%s) - start)) s"
fails=0
for t in all_reduce all_gather broadcast reduce_scatter reduce alltoall scatter gather sendrecv hypercube; do
	bin="$src/build/${t}_perf"
	if [ ! -x "$bin" ]; then
		echo "FAIL: ${t}_perf was not built"; fails=$((fails + 1)); continue
	fi
	libs=$(ldd "$bin")
	# NCCL and MPI dynamic: NCCL_NET_PLUGIN=braid is resolved by that libnccl.so
	for lib in libnccl.so libmpi.so; do
		grep -q "$lib" <<<"$libs" || { echo "FAIL: ${t}_perf does not link $lib"; fails=$((fails + 1)); }
	done
	echo "ok: ${t}_perf"
done
[ "$fails" -eq 0 ] || die "$fails problem(s) in the nccl-tests build"
echo "nccl-tests: all built with MPI against $CUDA_HOME"
