#!/usr/bin/env bash
# Compile (and link, when the libraries are there) the NCCL end-to-end program, so that
# it stays buildable on machines without a GPU. Skipped without nvcc or CUDA headers.
set -u
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
command -v nvcc >/dev/null || [ -x "$CUDA_HOME/bin/nvcc" ] || { echo "SKIP: no nvcc (CUDA toolkit absent)"; exit 77; }
for h in cuda_runtime_api.h nccl.h; do
	[ -f "$CUDA_HOME/include/$h" ] || { echo "SKIP: $CUDA_HOME/include/$h is absent"; exit 77; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
	-Wmissing-prototypes -O2 -isystem "$CUDA_HOME/include")
cc "${flags[@]}" -c tests/nccl/nccl_allreduce.c -o "$out/nccl_allreduce.o" || exit 1
if [ -e "$CUDA_HOME/lib64/libnccl.so" ] && [ -e "$CUDA_HOME/lib64/libcudart.so" ]; then
	cc -o "$out/nccl_allreduce" "$out/nccl_allreduce.o" -L"$CUDA_HOME/lib64" -lnccl -lcudart \
		-Wl,-rpath,"$CUDA_HOME/lib64" || exit 1
	echo "compiled and linked against $CUDA_HOME (libnccl, libcudart)"
else
	echo "compiled (libnccl or libcudart absent: not linked)"
fi
