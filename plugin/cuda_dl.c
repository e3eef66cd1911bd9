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

typedef int (*cu_pointer_get_attribute_fn)(void *data, int attribute, unsigned long long ptr);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cu_pointer_get_attribute_fn get_attr; /* written once, under once */
static void *lib;                            /* never closed: get_attr points into it */

static void load(void)
{
	/* In an NCCL process the driver is loaded already: this finds it. */
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib)
		get_attr = (cu_pointer_get_attribute_fn)dlsym(lib, "cuPointerGetAttribute");
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
