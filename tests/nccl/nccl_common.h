/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the NCCL end-to-end programs (nccl_allreduce.c, nccl_abort.c) share: the rank for
 * messages, the clock, CUDA and NCCL checks that exit with the call named, the unique id
 * handed from rank 0 to the others through a file (bounded wait), and each rank's
 * contribution to an all-reduce (small integers, exact in float).
 */
#ifndef BRAID_TESTS_NCCL_COMMON_H
#define BRAID_TESTS_NCCL_COMMON_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SKIP 77

static int rank_id = -1;

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CUDA_CHECK(call)                                                     \
	do {                                                                 \
		cudaError_t e_ = (call);                                     \
		if (e_ != cudaSuccess) {                                     \
			fprintf(stderr, "rank %d: %s: %s\n", rank_id, #call, \
				cudaGetErrorString(e_));                     \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define NCCL_CHECK(call)                                                                          \
	do {                                                                                      \
		ncclResult_t r_ = (call);                                                         \
		if (r_ != ncclSuccess) {                                                          \
			fprintf(stderr, "rank %d: %s: %s (%d); last error: %s\n", rank_id, #call, \
				ncclGetErrorString(r_), r_, ncclGetLastError(NULL));              \
			exit(1);                                                                  \
		}                                                                                 \
	} while (0)

static inline int write_id(const char *path, const ncclUniqueId *id)
{
	char tmp[4200];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wb");
	if (!f)
		return -1;
	if (fwrite(id, sizeof(*id), 1, f) != 1) {
		fclose(f);
		return -1;
	}
	if (fclose(f))
		return -1;
	return rename(tmp, path);
}

static inline int read_id(const char *path, ncclUniqueId *id, double timeout_s)
{
	double deadline = now_s() + timeout_s;

	for (;;) {
		FILE *f = fopen(path, "rb");

		if (f) {
			size_t n = fread(id, sizeof(*id), 1, f);

			fclose(f);
			if (n == 1)
				return 0;
		}
		if (now_s() > deadline)
			return -1;
		usleep(10000);
	}
}

/* Rank r contributes (r + 1) * (i % 13 + 1): small integers, exact in float. */
static inline float contribution(int rank, size_t i)
{
	return (float)((rank + 1) * (int)(i % 13 + 1));
}

#endif
