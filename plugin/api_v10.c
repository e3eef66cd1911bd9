// SPDX-License-Identifier: Apache-2.0
/* ncclNetPlugin_v10: the profiler callback of init (plugin/profiler.h) and the traffic class
 * on connect. */
#include "plugin/api_common.h"

/* v10 has no per-communicator context: init's callback is the process's (as NCCL's own IB
 * transport keeps it), and every comm made after it gets it. */
static ncclProfilerCallback_t v10_prof;

static ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	ncclResult_t rc = braid_init(logger, 10);

	if (rc == ncclSuccess)
		__atomic_store_n(&v10_prof, prof, __ATOMIC_RELEASE);
	return rc;
}

static ncclResult_t v10_listen(int dev, void *handle, void **listen_comm)
{
	const struct braid_conn_opts opts = {
		.traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF,
		.prof = __atomic_load_n(&v10_prof, __ATOMIC_ACQUIRE),
	};

	return braid_listen_opts(dev, &opts, handle, listen_comm);
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
		.prof = __atomic_load_n(&v10_prof, __ATOMIC_ACQUIRE),
	};

	return braid_connect(dev, &opts, handle, send_comm, dev_handle);
}

static ncclResult_t v10_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	return braid_isend_ph(send_comm, data, size, tag, mhandle, phandle, request);
}

static ncclResult_t v10_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request)
{
	return braid_irecv_ph(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
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
	.listen = v10_listen,
	.connect = v10_connect,
	.accept = braid_accept,
	.regMr = braid_reg_mr,
	.regMrDmaBuf = braid_reg_mr_dmabuf,
	.deregMr = braid_dereg_mr,
	.isend = v10_isend,
	.irecv = v10_irecv,
	.iflush = braid_iflush,
	.test = braid_test,
	.closeSend = braid_close_send,
	.closeRecv = braid_close_recv,
	.closeListen = braid_close_listen,
	.getDeviceMr = braid_get_device_mr,
	.irecvConsumed = braid_irecv_consumed,
	.makeVDevice = v10_make_vdevice,
};
