// SPDX-License-Identifier: Apache-2.0
/* ncclNetPlugin_v8: int sizes in isend/irecv, no finalize. */
#include "plugin/api_common.h"

static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props)
{
	const struct braid_dev_props *p;

	BRAID_API_GET_PROPS(dev, props, p);
	return ncclSuccess;
}

static ncclResult_t v8_connect(int dev, void *handle, void **send_comm,
			       ncclNetDeviceHandle_t **dev_handle)
{
	return braid_connect(dev, NULL, handle, send_comm, dev_handle);
}

static ncclResult_t v8_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
			     void **request)
{
	if (size < 0)
		return ncclInvalidArgument;
	return braid_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclResult_t v8_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
			     void **mhandles, void **request)
{
	size_t big[BRAID_MAX_RECVS];

	if (n < 1 || n > BRAID_MAX_RECVS || !sizes)
		return braid_irecv(recv_comm, n, data, NULL, tags, mhandles, request);
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0)
			return ncclInvalidArgument;
		big[i] = (size_t)sizes[i];
	}
	return braid_irecv(recv_comm, n, data, big, tags, mhandles, request);
}

static ncclResult_t v8_init(ncclDebugLogger_t logger)
{
	return braid_init(logger, 8);
}

BRAID_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = "braid",
	.init = v8_init,
	.devices = braid_devices,
	.getProperties = v8_get_properties,
	.listen = braid_listen,
	.connect = v8_connect,
	.accept = braid_accept,
	.regMr = braid_reg_mr,
	.regMrDmaBuf = braid_reg_mr_dmabuf,
	.deregMr = braid_dereg_mr,
	.isend = v8_isend,
	.irecv = v8_irecv,
	.iflush = braid_iflush,
	.test = braid_test,
	.closeSend = braid_close_send,
	.closeRecv = braid_close_recv,
	.closeListen = braid_close_listen,
	.getDeviceMr = braid_get_device_mr,
	.irecvConsumed = braid_irecv_consumed,
};
