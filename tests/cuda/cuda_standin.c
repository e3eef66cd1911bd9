// SPDX-License-Identifier: Apache-2.0
/*
 * libcuda.so.1 stand-in for tests (never shipped, never installed): "device memory" is host
 * memory, so a test can check every byte that a GPUDirect path moved. Each allocation is a
 * memfd mapped MAP_SHARED, and the dma-buf fd that cuMemGetHandleForAddressRange exports is
 * that memfd: whatever maps the fd (softverbs' ibv_reg_dmabuf_mr) sees the allocation's own
 * pages. Calls answer as the real driver does, errors included (CUDA_ERROR_NOT_INITIALIZED
 * before cuInit, CUDA_ERROR_INVALID_VALUE for a pointer that is no allocation, ...).
 *
 * Knobs (environment, read at cuInit):
 *   CUDA_STANDIN_DEVICES=N        devices (default 1; 0: cuInit says CUDA_ERROR_NO_DEVICE)
 *   CUDA_STANDIN_DRIVER_VERSION=V cuDriverGetVersion (default 12040; 11060 is too old for
 *                                 NCCL's dma-buf use, which needs 11070)
 *   CUDA_STANDIN_DMABUF=0         a GPU/driver without dma-buf: the attribute says 0 and
 *                                 cuMemGetHandleForAddressRange CUDA_ERROR_NOT_SUPPORTED
 *
 * Limit: a dma-buf handle is exported for a range that starts at an allocation's base (the
 * fd's offset 0 is the allocation's first byte); other ranges get CUDA_ERROR_INVALID_VALUE.
 * NCCL exports whole buffers (net.cc: its own buffers and registered user buffers).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/cuda/cuda_standin.h"

#define API __attribute__((visibility("default")))
#define MAX_ALLOCS 1024

struct alloc {
	uintptr_t base;
	size_t size;   /* as asked */
	size_t mapped; /* rounded up to pages */
	int fd;
	unsigned long long id;
};

/* cuMemAlloc/cuMemFree and the attribute queries come from any thread, as with CUDA. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc allocs[MAX_ALLOCS];
static unsigned long long next_id = 1;
static int inited, ndevices = 1, driver_version = 12040, dmabuf = 1;
static unsigned long flush_calls;

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

API CUresult cuInit(unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	ndevices = env_int("CUDA_STANDIN_DEVICES", 1);
	driver_version = env_int("CUDA_STANDIN_DRIVER_VERSION", 12040);
	dmabuf = env_int("CUDA_STANDIN_DMABUF", 1) != 0;
	inited = ndevices > 0;
	pthread_mutex_unlock(&lock);
	return ndevices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

/* Works before cuInit, as CUDA's does. */
API CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = env_int("CUDA_STANDIN_DRIVER_VERSION", 12040);
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *count)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	if (!inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	*count = ndevices;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	if (!inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: *value = 1; return CUDA_SUCCESS;
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *value = dmabuf; return CUDA_SUCCESS;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
}

/* The allocation holding ptr, lock held; NULL if none. */
static struct alloc *find(uintptr_t ptr)
{
	for (int i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].base && ptr >= allocs[i].base &&
		    ptr - allocs[i].base < allocs[i].size)
			return &allocs[i];
	return NULL;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), mapped = (size + page - 1) / page * page;
	struct alloc *a = NULL;
	void *p;
	int fd;

	if (!dptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (!inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	fd = memfd_create("cuda-standin", MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (ftruncate(fd, (off_t)mapped) ||
	    (p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS && !a; i++)
		if (!allocs[i].base)
			a = &allocs[i];
	if (a)
		*a = (struct alloc){ (uintptr_t)p, size, mapped, fd, next_id++ };
	pthread_mutex_unlock(&lock);
	if (!a) {
		munmap(p, mapped);
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	struct alloc a;
	struct alloc *f;

	pthread_mutex_lock(&lock);
	f = inited ? find((uintptr_t)dptr) : NULL;
	if (!f || f->base != (uintptr_t)dptr) {
		pthread_mutex_unlock(&lock);
		return inited ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
	}
	a = *f;
	memset(f, 0, sizeof(*f));
	pthread_mutex_unlock(&lock);
	munmap((void *)a.base, a.mapped);
	close(a.fd);
	return CUDA_SUCCESS;
}

/* One attribute of allocation a (NULL: not a CUDA pointer), as cuPointerGetAttributes
 * reports it; CUDA_ERROR_INVALID_VALUE for an attribute not modelled. */
static CUresult attr_of(const struct alloc *a, int attr, void *data)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT: *(void **)data = a ? (void *)&allocs : NULL; break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = a ? CU_MEMORYTYPE_DEVICE : 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = 0; break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = a ? a->id : 0; break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = 0; break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a ? 0 : -2; break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a ? a->base : 0; break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a ? a->size : 0; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

API CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr)
{
	struct alloc *a;
	CUresult rc;

	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!inited) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	a = find((uintptr_t)ptr);
	/* Unlike cuPointerGetAttributes, a pointer CUDA does not know is an error. */
	rc = a ? attr_of(a, attribute, data) : CUDA_ERROR_INVALID_VALUE;
	if (a && attribute == CU_POINTER_ATTRIBUTE_DEVICE_POINTER)
		*(CUdeviceptr *)data = ptr;
	pthread_mutex_unlock(&lock);
	return rc;
}

API CUresult cuPointerGetAttributes(unsigned int n, int *attributes, void **data, CUdeviceptr ptr)
{
	struct alloc *a;
	CUresult rc = CUDA_SUCCESS;

	if (!n || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!inited) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	/* A pointer CUDA does not know gets the default (zero) values, and success. */
	a = find((uintptr_t)ptr);
	for (unsigned int i = 0; i < n && rc == CUDA_SUCCESS; i++) {
		if (!data[i])
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			rc = attr_of(a, attributes[i], data[i]);
		if (rc == CUDA_SUCCESS && a && attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_POINTER)
			*(CUdeviceptr *)data[i] = ptr;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

API CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
					   int handle_type, unsigned long long flags)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct alloc *a;
	int fd = -1;

	if (!handle || !size || handle_type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!inited) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	if (!dmabuf) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	a = find((uintptr_t)dptr);
	/* CUDA wants dptr and size aligned to the host page size. */
	if (a && a->base == (uintptr_t)dptr && size % page == 0 && size <= a->mapped)
		fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&lock);
	if (fd < 0)
		return errno == EMFILE ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
	*(int *)handle = fd;
	return CUDA_SUCCESS;
}

API CUresult cuFlushGPUDirectRDMAWrites(int target, int scope)
{
	if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
	    (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER &&
	     scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!inited) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	flush_calls++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

API unsigned long cuda_standin_flush_calls(void)
{
	unsigned long n;

	pthread_mutex_lock(&lock);
	n = flush_calls;
	pthread_mutex_unlock(&lock);
	return n;
}

API CUresult cuGetErrorString(CUresult error, const char **str)
{
	static const struct {
		CUresult rc;
		const char *s;
	} names[] = {
		{ CUDA_SUCCESS, "no error" },
		{ CUDA_ERROR_INVALID_VALUE, "invalid argument" },
		{ CUDA_ERROR_OUT_OF_MEMORY, "out of memory" },
		{ CUDA_ERROR_NOT_INITIALIZED, "initialization error" },
		{ CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected" },
		{ CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal" },
		{ CUDA_ERROR_NOT_SUPPORTED, "operation not supported" },
	};

	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i].rc == error) {
			*str = names[i].s;
			return CUDA_SUCCESS;
		}
	}
	*str = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}
