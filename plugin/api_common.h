/* SPDX-License-Identifier: Apache-2.0 */
/* Small conversions shared by the ncclNetPlugin_vN adapters. */
#ifndef BRAID_API_COMMON_H
#define BRAID_API_COMMON_H

#include "plugin/core.h"

#define BRAID_EXPORT __attribute__((visibility("default")))

/* The props' shared part; the caller adds its version's fields. */
#define BRAID_API_GET_PROPS(dev, out, p)                            \
	do {                                                        \
		ncclResult_t rc_ = braid_get_properties(dev, &(p)); \
		if (rc_ != ncclSuccess)                             \
			return rc_;                                 \
		BRAID_FILL_COMMON_PROPS(out, p);                    \
	} while (0)

/* v9+ fields. */
#define BRAID_FILL_V9_PROPS(out, p, dev)                                                        \
	do {                                                                                    \
		(out)->forceFlush = (p)->force_flush;                                           \
		(out)->vProps.ndevs = (p)->vdev.n;                                              \
		for (int i_ = 0; i_ < (p)->vdev.n && i_ < (int)(sizeof((out)->vProps.devs) /    \
								sizeof((out)->vProps.devs[0])); \
		     i_++)                                                                      \
			(out)->vProps.devs[i_] = (p)->vdev.nic[i_];                             \
		(out)->maxP2pBytes = (p)->max_p2p_bytes;                                        \
		(out)->maxCollBytes = (p)->max_coll_bytes;                                      \
	} while (0)

/* makeVDevice of v9..v11, whose vProps hold 4 devices. */
static inline ncclResult_t braid_api_make_vdevice(int *d, const ncclNetVDeviceProps_t *props,
						  int api_version)
{
	return braid_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL,
				  api_version);
}

/*
 * The per-communicator context of v11 and v12 (api_ctx.c): init and finalize come in
 * pairs per communicator, the core counts them; listen, connect and setNetAttr check it.
 */
ncclResult_t braid_api_ctx_init(void **ctx, uint64_t comm_id, const ncclNetCommConfig_t *config,
				ncclDebugLogger_t logger, ncclProfilerCallback_t prof,
				int api_version);
ncclResult_t braid_api_ctx_finalize(void *ctx);
ncclResult_t braid_api_ctx_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t braid_api_ctx_connect(void *ctx, int dev, void *handle, void **send_comm,
				   ncclNetDeviceHandle_t **dev_handle);
ncclResult_t braid_api_ctx_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr);

#endif
