// SPDX-License-Identifier: Apache-2.0
/*
 * ncclNetPlugin_v11: init per communicator with a context, listen/connect take it,
 * finalize releases it (api_ctx.c). The global part of init is reference-counted in the
 * core.
 */
#include "plugin/api_common.h"

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
			     ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	return braid_api_ctx_init(ctx, comm_id, config, logger, prof, 11);
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

static ncclResult_t v11_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	return braid_isend_ph(send_comm, data, size, tag, mhandle, phandle, request);
}

static ncclResult_t v11_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request)
{
	return braid_irecv_ph(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
}

static ncclResult_t v11_make_vdevice(int *d, ncclNetVDeviceProps_t *props)
{
	return braid_api_make_vdevice(d, props, 11);
}

BRAID_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = "braid",
	.init = v11_init,
	.devices = braid_devices,
	.getProperties = v11_get_properties,
	.listen = braid_api_ctx_listen,
	.connect = braid_api_ctx_connect,
	.accept = braid_accept,
	.regMr = braid_reg_mr,
	.regMrDmaBuf = braid_reg_mr_dmabuf,
	.deregMr = braid_dereg_mr,
	.isend = v11_isend,
	.irecv = v11_irecv,
	.iflush = braid_iflush,
	.test = braid_test,
	.closeSend = braid_close_send,
	.closeRecv = braid_close_recv,
	.closeListen = braid_close_listen,
	.getDeviceMr = braid_get_device_mr,
	.irecvConsumed = braid_irecv_consumed,
	.makeVDevice = v11_make_vdevice,
	.finalize = braid_api_ctx_finalize,
	.setNetAttr = braid_api_ctx_set_net_attr,
};
