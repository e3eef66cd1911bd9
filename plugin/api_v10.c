// SPDX-License-Identifier: Apache-2.0
/* ncclNetPlugin_v10: profiler arguments (ignored: braid emits no profiler events) and the
 * traffic class on connect. */
#include "plugin/api_common.h"

static ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	(void)prof;
	return braid_init(logger, 10);
}

static ncclResult_t v10_get_properties(int dev, ncclNetProperties_v10_t *props)
{
	const struct braid_dev_props *p;

	BRAID_API_GET_PROPS(dev, props, p);
	BRAID_FILL_V9_PROPS(props, p, dev);
	return ncclSuccess;
}

static ncclResult_t v10_connect(int dev, ncclNetCommConfig_t *config, void *handle,
				void **send_comm, ncclNetDeviceHandle_t **dev_handle)
{
	struct braid_conn_opts opts = {
		.traffic_class = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF,
	};

	return braid_connect(dev, &opts, handle, send_comm, dev_handle);
}

static ncclResult_t v10_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	(void)phandle;
	return braid_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t v10_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return braid_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t v10_make_vdevice(int *d, ncclNetVDeviceProps_t *props)
{
	return braid_api_make_vdevice(d, props, 10);
}

BRAID_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = "braid",
	.init = v10_init,
	.devices = braid_devices,
	.getProperties = v10_get_properties,
	.listen = braid_listen,
	.connect = v10_connect,
	.accept = braid_accept,
	.regMr = braid_reg_mr,
	.regMrDmaBuf = braid_reg_mr_dmabuf,
	.deregMr = braid_dereg_mr,
	.isend = v10_isend,
	.irecv = v10_irecv,
	.iflush = braid_iflush,
	.test = braid_api_test,
	.closeSend = braid_close_send,
	.closeRecv = braid_close_recv,
	.closeListen = braid_close_listen,
	.getDeviceMr = braid_get_device_mr,
	.irecvConsumed = braid_irecv_consumed,
	.makeVDevice = v10_make_vdevice,
};
