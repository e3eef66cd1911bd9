// SPDX-License-Identifier: Apache-2.0
/*
 * The CUDA stand-in answers as the real driver documents (cuda.h): errors before cuInit,
 * CUDA_ERROR_INVALID_VALUE from cuPointerGetAttribute for a pointer that is no allocation
 * while cuPointerGetAttributes gives the defaults, a dma-buf fd whose pages are the
 * allocation's, and the knobs that make it a driver without dma-buf or without devices.
 * Each test runs in a child process: the driver, like CUDA's, initialises once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/cuda/cuda_standin.h"

static void in_child(void (*fn)(void), const char *env)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		if (env)
			putenv((char *)env);
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* cmocka's asserts longjmp out of the test; in a child, a failure must exit non-zero. */
#define CHECK(c)                                                            \
	do {                                                                \
		if (!(c)) {                                                 \
			print_error("%s:%d: %s\n", __FILE__, __LINE__, #c); \
			_exit(1);                                           \
		}                                                           \
	} while (0)

static void before_init(void)
{
	CUdeviceptr p;
	int n, v;

	CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
	CHECK(cuMemAlloc_v2(&p, 4096) == CUDA_ERROR_NOT_INITIALIZED);
	CHECK(cuDriverGetVersion(&v) == CUDA_SUCCESS && v == 12040);
	CHECK(cuInit(1) == CUDA_ERROR_INVALID_VALUE);
}

static void memory(void)
{
	int attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
			CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE };
	unsigned int type = 99;
	int ordinal = 99, dev, n, v;
	CUdeviceptr p, start = 1;
	size_t size = 1;
	void *data[] = { &type, &ordinal, &start, &size };
	char host[64];

	CHECK(cuInit(0) == CUDA_SUCCESS);
	CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 1);
	CHECK(cuDeviceGet(&dev, 1) == CUDA_ERROR_INVALID_DEVICE);
	CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS && dev == 0);
	CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0) == CUDA_SUCCESS &&
	      v == 1);
	CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0) ==
		      CUDA_SUCCESS &&
	      v == 1);
	CHECK(cuMemAlloc_v2(&p, 10000) == CUDA_SUCCESS);
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 9999) ==
		      CUDA_SUCCESS &&
	      type == CU_MEMORYTYPE_DEVICE);
	CHECK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) ==
		      CUDA_SUCCESS &&
	      ordinal == 0);
	/* one past the end, and host memory, are not CUDA pointers */
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 10000) ==
	      CUDA_ERROR_INVALID_VALUE);
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    (CUdeviceptr)(uintptr_t)host) == CUDA_ERROR_INVALID_VALUE);
	CHECK(cuPointerGetAttributes(4, attrs, data, p + 5) == CUDA_SUCCESS);
	CHECK(type == CU_MEMORYTYPE_DEVICE && ordinal == 0 && start == p && size == 10000);
	CHECK(cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)host) == CUDA_SUCCESS);
	CHECK(type == 0 && start == 0 && size == 0);
	memset((void *)(uintptr_t)p, 0xab, 10000); /* host memory: the test can touch it */
	CHECK(cuMemFree_v2(p + 1) == CUDA_ERROR_INVALID_VALUE);
	CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
	CHECK(cuMemFree_v2(p) == CUDA_ERROR_INVALID_VALUE);
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) ==
	      CUDA_ERROR_INVALID_VALUE);
	CHECK(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
					 CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER) == CUDA_SUCCESS);
	CHECK(cuFlushGPUDirectRDMAWrites(7, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER) ==
	      CUDA_ERROR_INVALID_VALUE);
	CHECK(cuda_standin_flush_calls() == 1);
}

static void dmabuf_fd(void)
{
	long page = sysconf(_SC_PAGESIZE);
	CUdeviceptr p;
	char *view;
	int fd = -1;

	CHECK(cuInit(0) == CUDA_SUCCESS);
	CHECK(cuMemAlloc_v2(&p, 4 * (size_t)page) == CUDA_SUCCESS);
	CHECK(cuMemGetHandleForAddressRange(&fd, p, 4 * (size_t)page,
					    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					    0) == CUDA_SUCCESS);
	CHECK(fd >= 0);
	view = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, page);
	CHECK(view != MAP_FAILED);
	memset((void *)(uintptr_t)(p + (CUdeviceptr)page), 0x5c, 16);
	CHECK(view[0] == 0x5c && view[16] == 0);
	view[100] = 0x11;
	CHECK(((char *)(uintptr_t)p)[page + 100] == 0x11);
	munmap(view, 2 * (size_t)page);
	close(fd);
	/* not page aligned, not an allocation's base, not a known handle type */
	CHECK(cuMemGetHandleForAddressRange(&fd, p, 100, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
	      CUDA_ERROR_INVALID_VALUE);
	CHECK(cuMemGetHandleForAddressRange(&fd, p + (CUdeviceptr)page, (size_t)page,
					    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
					    0) == CUDA_ERROR_INVALID_VALUE);
	CHECK(cuMemGetHandleForAddressRange(&fd, p, (size_t)page, 2, 0) ==
	      CUDA_ERROR_INVALID_VALUE);
	/* the allocation stays alive while an exported fd is open, as a dma-buf does */
	CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
}

static void no_dmabuf(void)
{
	CUdeviceptr p;
	int v = -1, fd;

	CHECK(cuInit(0) == CUDA_SUCCESS);
	CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0) == CUDA_SUCCESS &&
	      v == 0);
	CHECK(cuMemAlloc_v2(&p, 4096) == CUDA_SUCCESS);
	CHECK(cuMemGetHandleForAddressRange(&fd, p, 4096, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
	      CUDA_ERROR_NOT_SUPPORTED);
}

static void no_device(void)
{
	int n;

	CHECK(cuInit(0) == CUDA_ERROR_NO_DEVICE);
	CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
}

static void old_driver(void)
{
	int v;

	CHECK(cuDriverGetVersion(&v) == CUDA_SUCCESS && v == 11060);
}

static void test_before_init(void **s)
{
	in_child(before_init, NULL);
}
static void test_memory(void **s)
{
	in_child(memory, NULL);
}
static void test_dmabuf_fd(void **s)
{
	in_child(dmabuf_fd, NULL);
}
static void test_no_dmabuf(void **s)
{
	in_child(no_dmabuf, "CUDA_STANDIN_DMABUF=0");
}
static void test_no_device(void **s)
{
	in_child(no_device, "CUDA_STANDIN_DEVICES=0");
}
static void test_old_driver(void **s)
{
	in_child(old_driver, "CUDA_STANDIN_DRIVER_VERSION=11060");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_before_init), cmocka_unit_test(test_memory),
		cmocka_unit_test(test_dmabuf_fd),   cmocka_unit_test(test_no_dmabuf),
		cmocka_unit_test(test_no_device),   cmocka_unit_test(test_old_driver),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
