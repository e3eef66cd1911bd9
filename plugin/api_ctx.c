// SPDX-License-Identifier: Apache-2.0
/*
 * The per-communicator context of ncclNet v11 and v12: init makes one (and takes a
 * reference on the core), finalize releases it; listen, connect and setNetAttr check it.
 */
#include <stdlib.h>

#include "plugin/api_common.h"
#include "plugin/log.h"

ncclResult_t braid_api_ctx_init(void **ctx, uint64_t comm_id, const ncclNetCommConfig_t *config,
				ncclDebugLogger_t logger, ncclProfilerCallback_t prof,
				int api_version)
{
	struct braid_ctx *c;
	ncclResult_t rc;

	if (!ctx)
		return ncclInvalidArgument;
	*ctx = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	rc = braid_init(logger, api_version);
	if (rc != ncclSuccess) {
		free(c);
		return rc;
	}
	c->magic = BRAID_MAGIC_CTX;
	c->comm_id = comm_id;
	c->opts.traffic_class = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
	c->opts.prof = prof;
	*ctx = c;
	return ncclSuccess;
}

ncclResult_t braid_api_ctx_finalize(void *ctx)
{
	ncclResult_t rc;

	/* NCCL 2.29 (src/plugin/net.cc, ncclNetPluginInit's fail path) calls finalize with
	 * the context of an init that failed, which braid left NULL: nothing to release. */
	if (!ctx)
		return ncclSuccess;
	rc = braid_ctx_check(ctx, "finalize");
	if (rc != ncclSuccess)
		return rc;
	((struct braid_ctx *)ctx)->magic = BRAID_MAGIC_DEAD;
	free(ctx);
	return braid_finalize();
}

ncclResult_t braid_api_ctx_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	ncclResult_t rc = braid_ctx_check(ctx, "listen");

	if (rc != ncclSuccess)
		return rc;
	return braid_listen_opts(dev, &((struct braid_ctx *)ctx)->opts, handle, listen_comm);
}

ncclResult_t braid_api_ctx_connect(void *ctx, int dev, void *handle, void **send_comm,
				   ncclNetDeviceHandle_t **dev_handle)
{
	ncclResult_t rc = braid_ctx_check(ctx, "connect");

	if (rc != ncclSuccess)
		return rc;
	return braid_connect(dev, &((struct braid_ctx *)ctx)->opts, handle, send_comm, dev_handle);
}

ncclResult_t braid_api_ctx_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	/* Hints about concurrency per collective; braid has no policy that uses them yet. */
	(void)attr;
	return braid_ctx_check(ctx, "setNetAttr");
}
