// SPDX-License-Identifier: Apache-2.0
#include "plugin/cuda_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* CUDA's values (cuda.h): the plugin builds without the toolkit. */
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2

#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124

typedef int (*cu_pointer_get_attribute_fn)(void *data, int attribute, unsigned long long ptr);
typedef int (*cu_int_fn)(int *value);
typedef int (*cu_device_get_attribute_fn)(int *value, int attribute, int device);

/* Written once, under once; never closed: the pointers point into lib. */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static cu_pointer_get_attribute_fn get_attr;
static cu_int_fn driver_version, device_count;
static cu_device_get_attribute_fn device_attr;
static void *lib;

static void load(void)
{
	/* In an NCCL process the driver is loaded already: this finds it. */
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return;
	get_attr = (cu_pointer_get_attribute_fn)dlsym(lib, "cuPointerGetAttribute");
	driver_version = (cu_int_fn)dlsym(lib, "cuDriverGetVersion");
	device_count = (cu_int_fn)dlsym(lib, "cuDeviceGetCount");
	device_attr = (cu_device_get_attribute_fn)dlsym(lib, "cuDeviceGetAttribute");
}

int braid_cuda_dmabuf(int *version)
{
	int n = 0, v = 0;

	pthread_once(&once, load);
	*version = 0;
	if (!driver_version || !device_count || !device_attr || driver_version(&v))
		return -1;
	*version = v;
	if (v < 11070)
		return 0;
	/* The driver answers only after cuInit, which NCCL has made by the time it inits a
	 * network plugin; without it braid cannot tell. */
	if (device_count(&n) || n < 1)
		return -1;
	for (int d = 0; d < n; d++) {
		int flag = 0;

		if (device_attr(&flag, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) || !flag)
			return 0;
	}
	return 1;
}

int braid_cuda_available(void)
{
	pthread_once(&once, load);
	return get_attr != NULL;
}

int braid_cuda_ptr_device(const void *p, int *ordinal, char *why, int why_len)
{
	unsigned int type = 0;
	int rc;

	if (!braid_cuda_available()) {
		snprintf(why, (size_t)why_len, "no CUDA driver (libcuda.so.1)");
		return -1;
	}
	rc = get_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)p);
	if (!rc && type != CU_MEMORYTYPE_DEVICE) {
		snprintf(why, (size_t)why_len, "not device memory (CUDA memory type %u)", type);
		return -1;
	}
	if (!rc)
		rc = get_attr(ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (uintptr_t)p);
	if (rc) {
		snprintf(why, (size_t)why_len, "cuPointerGetAttribute: CUresult %d", rc);
		return -1;
	}
	return 0;
}
