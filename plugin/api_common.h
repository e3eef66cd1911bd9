/* SPDX-License-Identifier: Apache-2.0 */
/* Small conversions shared by the ncclNetPlugin_vN adapters. */
#ifndef BRAID_API_COMMON_H
#define BRAID_API_COMMON_H

#include <limits.h>

#include "plugin/core.h"

#define BRAID_EXPORT __attribute__((visibility("default")))

/* test() reports int sizes in every version; a size above INT_MAX cannot be said. */
static inline ncclResult_t braid_api_test(void *request, int *done, int *sizes)
{
	size_t big[BRAID_MAX_RECVS];
	int n = 0;
	ncclResult_t rc = braid_test(request, done, big, &n);

	if (rc == ncclSuccess && *done && sizes)
		for (int i = 0; i < n; i++)
			sizes[i] = big[i] > INT_MAX ? INT_MAX : (int)big[i];
	return rc;
}

/* The props' shared part; the caller adds its version's fields. */
#define BRAID_API_GET_PROPS(dev, out, p)                            \
	do {                                                        \
		ncclResult_t rc_ = braid_get_properties(dev, &(p)); \
		if (rc_ != ncclSuccess)                             \
			return rc_;                                 \
		BRAID_FILL_COMMON_PROPS(out, p);                    \
	} while (0)

/* v9+ fields. */
#define BRAID_FILL_V9_PROPS(out, p, dev)                            \
	do {                                                        \
		(out)->forceFlush = (p)->force_flush;               \
		(out)->vProps.ndevs = (p)->vdev.n;                  \
		for (int i_ = 0; i_ < (p)->vdev.n; i_++)            \
			(out)->vProps.devs[i_] = (p)->vdev.nic[i_]; \
		(out)->maxP2pBytes = (p)->max_p2p_bytes;            \
		(out)->maxCollBytes = (p)->max_coll_bytes;          \
	} while (0)

#endif
