// SPDX-License-Identifier: Apache-2.0
/* ncclNetPlugin_v9: size_t sizes, vProps, maxP2pBytes; no finalize. */
#include "plugin/api_common.h"

static ncclResult_t v9_get_properties(int dev, ncclNetProperties_v9_t *props)
{
	const struct braid_dev_props *p;

	BRAID_API_GET_PROPS(dev, props, p);
	BRAID_FILL_V9_PROPS(props, p, dev);
	return ncclSuccess;
}

static ncclResult_t v9_connect(int dev, void *handle, void **send_comm,
			       ncclNetDeviceHandle_t **dev_handle)
{
	return braid_connect(dev, NULL, handle, send_comm, dev_handle);
}

static ncclResult_t v9_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **request)
{
	return braid_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t v9_make_vdevice(int *d, ncclNetVDeviceProps_t *props)
{
	return braid_api_make_vdevice(d, props, 9);
}

static ncclResult_t v9_init(ncclDebugLogger_t logger)
{
	return braid_init(logger, 9);
}

BRAID_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = "braid",
	.init = v9_init,
	.devices = braid_devices,
	.getProperties = v9_get_properties,
	.listen = braid_listen,
	.connect = v9_connect,
	.accept = braid_accept,
	.regMr = braid_reg_mr,
	.regMrDmaBuf = braid_reg_mr_dmabuf,
	.deregMr = braid_dereg_mr,
	.isend = braid_isend,
	.irecv = v9_irecv,
	.iflush = braid_iflush,
	.test = braid_test,
	.closeSend = braid_close_send,
	.closeRecv = braid_close_recv,
	.closeListen = braid_close_listen,
	.getDeviceMr = braid_get_device_mr,
	.irecvConsumed = braid_irecv_consumed,
	.makeVDevice = v9_make_vdevice,
};
