// SPDX-License-Identifier: Apache-2.0
/*
 * ncclNetPlugin_v12 (NCCL 2.30): v11's calls and context, with properties that say the
 * device's railId and planeId (plugin/net_ids.c) and a makeVDevice of up to 8 devices,
 * of which braid fuses at most BRAID_VDEV_MAX_NICS today.
 */
#include <stddef.h>

#include "plugin/api_common.h"

/* The layouts NCCL 2.30 reads (tests/unit/nccl-net-abi-v8-v12.txt; test_abi checks every
 * member): a mismatch here is a build error, not garbage in NCCL's graph search. */
_Static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36, "vProps v12");
_Static_assert(sizeof(ncclNetProperties_v12_t) == 128, "properties v12");
_Static_assert(offsetof(ncclNetProperties_v12_t, vProps) == 64, "vProps offset");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "maxP2pBytes offset");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120, "mMRS offset");
_Static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124, "railId offset");
_Static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126, "planeId offset");
_Static_assert(sizeof(ncclNet_v12_t) == 176, "ncclNet_v12_t");
_Static_assert(offsetof(ncclNet_v12_t, makeVDevice) == 152, "makeVDevice offset");
_Static_assert(sizeof(ncclNetAttr_v12_t) == 44 && sizeof(ncclNetCommConfig_v12_t) == 4,
	       "attr, config v12");

static ncclResult_t v12_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
			     ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	return braid_api_ctx_init(ctx, comm_id, config, logger, prof, 12);
}

static ncclResult_t v12_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	const struct braid_dev_props *p;

	BRAID_API_GET_PROPS(dev, props, p);
	BRAID_FILL_V9_PROPS(props, p, dev);
	/* every slot written: NCCL copies only ndevs of them, a reader may copy all */
	for (int i = p->vdev.n; i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
		props->vProps.devs[i] = 0;
	props->maxMultiRequestSize = 1;
	props->railId = (int16_t)p->rail_id;
	props->planeId = (int16_t)p->plane_id;
	return ncclSuccess;
}

static ncclResult_t v12_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	return braid_isend_ph(send_comm, data, size, tag, mhandle, phandle, request);
}

static ncclResult_t v12_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request)
{
	return braid_irecv_ph(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
}

static ncclResult_t v12_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
	return braid_make_vdevice(d, props ? props->ndevs : 0, props ? props->devs : NULL, 12);
}

BRAID_EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
	.name = "braid",
	.init = v12_init,
	.devices = braid_devices,
	.getProperties = v12_get_properties,
	.listen = braid_api_ctx_listen,
	.connect = braid_api_ctx_connect,
	.accept = braid_accept,
	.regMr = braid_reg_mr,
	.regMrDmaBuf = braid_reg_mr_dmabuf,
	.deregMr = braid_dereg_mr,
	.isend = v12_isend,
	.irecv = v12_irecv,
	.iflush = braid_iflush,
	.test = braid_test,
	.closeSend = braid_close_send,
	.closeRecv = braid_close_recv,
	.closeListen = braid_close_listen,
	.getDeviceMr = braid_get_device_mr,
	.irecvConsumed = braid_irecv_consumed,
	.makeVDevice = v12_make_vdevice,
	.finalize = braid_api_ctx_finalize,
	.setNetAttr = braid_api_ctx_set_net_attr, /* v12's attr is v11's */
};
