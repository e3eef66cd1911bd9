/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The slice of the CUDA driver API that tests/cuda/libcuda.so.1 (the stand-in) and the
 * tests that drive braid as NCCL would use. Values are CUDA's (cuda.h, 13.0); cuda.h is
 * not a Debian package, so CI has none: check_cuda_h.c checks them against it where the
 * toolkit is installed (cuda.mk builds it then).
 */
#ifndef BRAID_CUDA_STANDIN_H
#define BRAID_CUDA_STANDIN_H

#include <stddef.h>
#include <stdint.h>

/* name, value: every constant the stand-in and its tests use. */
#define CUDA_STANDIN_VALUES(X)                                   \
	X(CUDA_SUCCESS, 0)                                       \
	X(CUDA_ERROR_INVALID_VALUE, 1)                           \
	X(CUDA_ERROR_OUT_OF_MEMORY, 2)                           \
	X(CUDA_ERROR_NOT_INITIALIZED, 3)                         \
	X(CUDA_ERROR_NO_DEVICE, 100)                             \
	X(CUDA_ERROR_INVALID_DEVICE, 101)                        \
	X(CUDA_ERROR_NOT_SUPPORTED, 801)                         \
	X(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 116)    \
	X(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 124)            \
	X(CU_POINTER_ATTRIBUTE_CONTEXT, 1)                       \
	X(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 2)                   \
	X(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 3)                \
	X(CU_POINTER_ATTRIBUTE_BUFFER_ID, 7)                     \
	X(CU_POINTER_ATTRIBUTE_IS_MANAGED, 8)                    \
	X(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 9)                \
	X(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, 11)             \
	X(CU_POINTER_ATTRIBUTE_RANGE_SIZE, 12)                   \
	X(CU_MEMORYTYPE_HOST, 1)                                 \
	X(CU_MEMORYTYPE_DEVICE, 2)                               \
	X(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 1)                \
	X(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX, 0) \
	X(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER, 100)         \
	X(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES, 200)

#ifndef CUDA_STANDIN_VALUES_ONLY /* check_cuda_h.c: the toolkit's cuda.h defines them */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define CUDA_STANDIN_ENUM(name, value) name = value,
enum { CUDA_STANDIN_VALUES(CUDA_STANDIN_ENUM) };
#undef CUDA_STANDIN_ENUM

/* What the stand-in exports (CUDA's signatures, the enums as int). */
CUresult cuInit(unsigned int flags);
CUresult cuDriverGetVersion(int *version);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr);
CUresult cuPointerGetAttributes(unsigned int n, int *attributes, void **data, CUdeviceptr ptr);
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size, int handle_type,
				       unsigned long long flags);
CUresult cuFlushGPUDirectRDMAWrites(int target, int scope);
CUresult cuGetErrorString(CUresult error, const char **str);
#endif

#ifndef CUDA_STANDIN_VALUES_ONLY
/* The stand-in's own query (not CUDA's): calls of cuFlushGPUDirectRDMAWrites so far. */
unsigned long cuda_standin_flush_calls(void);
#endif

#endif
