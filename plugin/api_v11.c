// SPDX-License-Identifier: Apache-2.0
/*
 * ncclNetPlugin_v11: init per communicator with a context, listen/connect take it,
 * finalize releases it. The global part of init is reference-counted in the core.
 */
#include <stdlib.h>

#include "plugin/api_common.h"
#include "plugin/log.h"

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
			     ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	struct braid_ctx *c;
	ncclResult_t rc;

	(void)prof;
	if (!ctx)
		return ncclInvalidArgument;
	*ctx = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	rc = braid_init(logger, 11);
	if (rc != ncclSuccess) {
		free(c);
		return rc;
	}
	c->magic = BRAID_MAGIC_CTX;
	c->comm_id = comm_id;
	c->opts.traffic_class = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
	*ctx = c;
	return ncclSuccess;
}

static ncclResult_t v11_finalize(void *ctx)
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

static ncclResult_t v11_get_properties(int dev, ncclNetProperties_v11_t *props)
{
	const struct braid_dev_props *p;

	BRAID_API_GET_PROPS(dev, props, p);
	BRAID_FILL_V9_PROPS(props, p, dev);
	/* braid has no multi-request (several NCCL requests in one network operation). */
	props->maxMultiRequestSize = 1;
	return ncclSuccess;
}

static ncclResult_t v11_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	ncclResult_t rc = braid_ctx_check(ctx, "listen");

	return rc != ncclSuccess ? rc : braid_listen(dev, handle, listen_comm);
}

static ncclResult_t v11_connect(void *ctx, int dev, void *handle, void **send_comm,
				ncclNetDeviceHandle_t **dev_handle)
{
	ncclResult_t rc = braid_ctx_check(ctx, "connect");

	if (rc != ncclSuccess)
		return rc;
	return braid_connect(dev, &((struct braid_ctx *)ctx)->opts, handle, send_comm, dev_handle);
}

static ncclResult_t v11_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	(void)phandle;
	return braid_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t v11_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return braid_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t v11_make_vdevice(int *d, ncclNetVDeviceProps_t *props)
{
	return braid_make_vdevice(d, props);
}

static ncclResult_t v11_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	/* Hints about concurrency per collective; braid has no policy that uses them yet. */
	(void)attr;
	return braid_ctx_check(ctx, "setNetAttr");
}

BRAID_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = "braid",
	.init = v11_init,
	.devices = braid_devices,
	.getProperties = v11_get_properties,
	.listen = v11_listen,
	.connect = v11_connect,
	.accept = braid_accept,
	.regMr = braid_reg_mr,
	.regMrDmaBuf = braid_reg_mr_dmabuf,
	.deregMr = braid_dereg_mr,
	.isend = v11_isend,
	.irecv = v11_irecv,
	.iflush = braid_iflush,
	.test = braid_api_test,
	.closeSend = braid_close_send,
	.closeRecv = braid_close_recv,
	.closeListen = braid_close_listen,
	.getDeviceMr = braid_get_device_mr,
	.irecvConsumed = braid_irecv_consumed,
	.makeVDevice = v11_make_vdevice,
	.finalize = v11_finalize,
	.setNetAttr = v11_set_net_attr,
};
