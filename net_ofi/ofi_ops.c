// SPDX-License-Identifier: Apache-2.0
/*
 * The net_ofi backend as the core sees it: its ops table, isend and irecv with the
 * profiler's handle (here, above ofi_data.c and ofi_prof.c, so that the data path's calls
 * into the profiler's event helpers make no circle), and fini, which takes back what
 * comms NCCL never closed still have posted before each endpoint closes.
 */
#include "net_ofi/ofi.h"
#include "net_ofi/ofi_watch.h"
#include "plugin/clock.h"
#include "plugin/log.h"

/*
 * Comms NCCL never closed, and parked lanes, may still have operations posted: take them
 * back before the endpoint closes (rxm in libfabric 1.17 crashes closing an endpoint that
 * holds receives after its peer's connection broke). Bounded like a close.
 */
static void dev_quiesce(struct ofi_dev *d)
{
	int left, rc;

	pthread_mutex_lock(&d->ep_lock);
	for (struct ofi_lane *l = d->lanes; l; l = l->next) {
		l->closing = 1;
		ofi_lane_cancel(l);
	}
	left = ofi_dev_reap(d, ofi_dev_lanes_left, NULL, 0, &rc);
	pthread_mutex_unlock(&d->ep_lock);
	if (left > 0)
		BRAID_INFO(NCCL_NET,
			   "ofi: device %s: %d operation(s) still outstanding at fini; "
			   "closing the endpoint anyway",
			   d->name, left);
}

static int ofi_init(const struct braid_backend_env *env, char *why, size_t whylen)
{
	int rc = ofi_devs_init(env, why, whylen);

	if (!rc)
		ofi_watch_start();
	return rc;
}

static void ofi_fini(void)
{
	ofi_watch_stop();
	for (int d = 0; d < ofi.ndevs; d++) {
		struct ofi_dev *dev = &ofi.devs[d];

		if (dev->ep)
			dev_quiesce(dev);
		pthread_mutex_lock(&dev->lock);
		ofi_dev_close_ep(dev);
		pthread_mutex_unlock(&dev->lock);
		ofi_mr_cache_purge(dev);
	}
	ofi_devs_free();
}

static int ofi_ndevs(void)
{
	return ofi.ndevs;
}

#define COLD __attribute__((cold, noinline))

/* Out of line, with isend_ph's and irecv_ph's own arguments, so that both branches there
 * are a tail call that leaves the arguments in place. */
static COLD ncclResult_t isend_prof(void *send_comm, void *data, size_t size, int tag,
				    void *mhandle, void *phandle, void **request)
{
	struct ofi_comm *c = to_ofi_comm(send_comm);

	return braid_prof_isend(c->prof, &c->reqs, 1, ofi_isend, c, data, size, tag, mhandle,
				phandle, request);
}

static COLD ncclResult_t irecv_prof(void *recv_comm, int n, void **data, const size_t *sizes,
				    const int *tags, void **mhandles, void **phandles,
				    void **request)
{
	struct ofi_comm *c = to_ofi_comm(recv_comm);

	return braid_prof_irecv(c->prof, &c->reqs, 1, ofi_irecv, c, n, data, sizes, tags, mhandles,
				phandles, request);
}

/* With no callback, isend_ph and irecv_ph are a test and a jump to isend or irecv
 * (their arguments in NCCL's order, as the core's, so that neither moves them). */
static ncclResult_t ofi_isend_ph(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				 void *phandle, void **request)
{
	if (__builtin_expect(!to_ofi_comm(send_comm)->prof, 1))
		return ofi_isend(send_comm, data, size, tag, mhandle, request);
	return isend_prof(send_comm, data, size, tag, mhandle, phandle, request);
}

static ncclResult_t ofi_irecv_ph(void *recv_comm, int n, void **data, const size_t *sizes,
				 const int *tags, void **mhandles, void **phandles, void **request)
{
	if (__builtin_expect(!to_ofi_comm(recv_comm)->prof, 1))
		return ofi_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
	return irecv_prof(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
}

const struct braid_backend_ops braid_ofi_ops = {
	.name = "ofi",
	.kind = BRAID_BACKEND_OFI,
	.max_nics = BRAID_VDEV_MAX_NICS, /* a comm: one lane per domain */
	.init = ofi_init,
	.fini = ofi_fini,
	.ndevs = ofi_ndevs,
	.get_props = ofi_get_props,
	.listen = ofi_listen,
	.connect = ofi_connect,
	.accept = ofi_accept,
	.reg_mr = ofi_reg_mr,
	/* dma-buf needs libfabric 1.20 (FI_MR_DMABUF); Debian 12 has 1.17: not advertised. */
	.reg_mr_dmabuf = NULL,
	.dereg_mr = ofi_dereg_mr,
	.isend = ofi_isend,
	.irecv = ofi_irecv,
	.iflush = ofi_iflush,
	.test = ofi_test,
	.test_flush = ofi_flush_test,
	.close_send = ofi_close_comm,
	.close_recv = ofi_close_comm,
	.close_listen = ofi_close_listen,
	.isend_ph = ofi_isend_ph,
	.irecv_ph = ofi_irecv_ph,
	.prof_attach = ofi_prof_attach,
	.prof_detach = ofi_prof_detach,
};
