// SPDX-License-Identifier: Apache-2.0
/*
 * Memory registration: NCCL's handle holds the buffer's registration on the device of
 * each lane of the comm, each through that device's cache (plugin/mr_cache.h). When the
 * provider binds MRs to endpoints (FI_MR_ENDPOINT), registrations bind to the device's
 * shared endpoint, so they are device-wide and cached all the same. Where iflush reads
 * receive buffers back (ofi_flush.c), they are registered for that read as well.
 */
#include <stdlib.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_hmem.h"
#include "plugin/cuda_dl.h"
#include "plugin/log.h"
#include "plugin/params.h"

/* CUDA memory (FI_HMEM): fi_mr_regattr with iface FI_HMEM_CUDA and the buffer's device,
 * from the CUDA driver; a registration wherever the provider needs one (FI_MR_LOCAL or
 * FI_MR_HMEM) or a flush reads it back. d->lock held (the cache), as for host buffers. */
static int reg_cuda(struct ofi_dev *d, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
		    void **desc)
{
	uint64_t mr_mode = d->info->domain_attr->mr_mode;
	struct fi_mr_attr attr;
	struct iovec iov;
	char why[96];
	int dev, rc;

	*mr = NULL;
	*desc = NULL;
	if (braid_cuda_ptr_device(buf, &dev, why, sizeof(why))) {
		BRAID_WARN("ofi: regMr(NCCL_PTR_CUDA) of %p (%zu bytes) on %s: %s", buf, len,
			   d->name, why);
		return -FI_EINVAL;
	}
	if (!ofi_hmem_needs_registration(mr_mode, NCCL_PTR_CUDA) && !(access & FI_REMOTE_READ))
		return 0;
	ofi_hmem_mr_attr(&attr, &iov, buf, len, access, ofi_mr_next_key(d), NCCL_PTR_CUDA, dev);
	pthread_mutex_lock(&d->ep_lock);
	rc = ofi_mr_bind_or_close(d, fi_mr_regattr(d->domain, &attr, 0, mr), mr);
	pthread_mutex_unlock(&d->ep_lock);
	if (rc) {
		BRAID_WARN("ofi: registering CUDA memory %p (%zu bytes, device %d, FI_HMEM_CUDA) "
			   "on %s failed: %s",
			   buf, len, dev, d->name, ofi_strerror(rc));
		*mr = NULL;
		return rc;
	}
	*desc = fi_mr_desc(*mr);
	return 0;
}

static void dev_mr_free(struct ofi_dev_mr *m)
{
	ofi_mr_close_raw(m->dev, m->mr);
	free(m);
}

static void dev_mr_release(struct braid_mr_range *r)
{
	dev_mr_free(braid_container_of(r, struct ofi_dev_mr, range));
}

/* The cache's registration of r's pages on endpoint dev (braid_mr_backend). */
static int reg_range(void *dev, struct braid_mr_range *r)
{
	struct ofi_dev_mr *m = braid_container_of(r, struct ofi_dev_mr, range);
	struct ofi_dev *d = dev;
	uint64_t access = FI_SEND | FI_RECV | (ofi_flush_due(d, r->type) ? FI_REMOTE_READ : 0);

	m->dev = d;
	if (r->type == NCCL_PTR_CUDA) /* both leave nothing behind when they fail */
		return reg_cuda(d, (void *)r->base, r->len, access, &m->mr, &m->desc);
	return ofi_mr_reg_raw(d, (void *)r->base, r->len, access, &m->mr, &m->desc);
}

static struct braid_mr_range *dev_mr_alloc(void)
{
	struct ofi_dev_mr *m = calloc(1, sizeof(*m));

	/* cppcheck-suppress memleak ; the record is reached through its range (container_of) */
	return m ? &m->range : NULL;
}

static const struct braid_mr_backend ofi_mr_backend = {
	.alloc = dev_mr_alloc,
	.reg = reg_range,
	.release = dev_mr_release,
};

/* The buffer's registration on d, from its cache or new. */
static int dev_mr_get(struct ofi_dev *d, void *data, size_t size, int type, struct ofi_dev_mr **out)
{
	struct braid_mr_range *r;

	if (braid_mr_cache_get_or_reg(&d->cache, &d->lock, (int)braid_param_int(BRAID_P_MR_CACHE),
				      &ofi_mr_backend, d, data, size, type, &r))
		return -1;
	*out = braid_container_of(r, struct ofi_dev_mr, range);
	return 0;
}

static void dev_mr_put(struct ofi_dev_mr *m)
{
	braid_mr_cache_unref(&m->dev->cache, &m->dev->lock, &ofi_mr_backend, &m->range);
}

static void mr_free(struct ofi_mr *m)
{
	for (int k = 0; k < m->nlanes; k++)
		dev_mr_put(m->lane[k]);
	m->magic = BRAID_MAGIC_DEAD;
	free(m);
}

ncclResult_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct ofi_comm *c = to_ofi_comm(comm);
	struct ofi_dev *d0 = c->lane[0].dev;
	struct ofi_mr *m;

	if (type != NCCL_PTR_HOST &&
	    (type != NCCL_PTR_CUDA || !d0->hmem_caps || !braid_cuda_available())) {
		BRAID_WARN("ofi: regMr of CUDA memory on %s, but ptrSupport did not offer it (%s)",
			   d0->name,
			   d0->hmem_caps ? "no CUDA driver" : "no usable FI_HMEM on this device");
		return ncclInvalidUsage;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return ncclSystemError;
	braid_mr_range_init(&m->range, data, size, type);
	for (int k = 0; k < c->nlanes; k++) {
		if (dev_mr_get(c->lane[k].dev, data, size, type, &m->lane[k])) {
			mr_free(m);
			return ncclSystemError;
		}
		m->nlanes = k + 1;
	}
	m->magic = BRAID_MAGIC_MR;
	*mhandle = m;
	return ncclSuccess;
}

/*
 * ncclCommAbort deregisters a comm's buffers, frees them, and only then closes the comm
 * (NCCL's net.cc, recvProxyFree and sendProxyFree), with its sends and receives still
 * posted. A NIC that moves data itself stops at the deregistration; tcp and shm copy
 * with the CPU, and would write into the freed receive buffer, or read the freed send
 * buffer, later: under NCCL 2.28 on a GPU host that crashed both ranks in fi_cq_read, in
 * the second round of aborts (tests/nccl/nccl_abort.c). So what the comm has posted on
 * this memory is taken back first, and its requests fail.
 */
static void drop_ops(struct ofi_comm *c, const struct ofi_mr *m)
{
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];
		int left;

		if (!l->id)
			continue;
		pthread_mutex_lock(&l->dev->ep_lock);
		left = ofi_lane_drop_mr(l, m);
		pthread_mutex_unlock(&l->dev->ep_lock);
		if (left)
			BRAID_WARN("ofi: %s comm %s %s: deregMr of memory under %d operation(s) "
				   "that %s could not take back (%d ms after its last completion): "
				   "the provider may still touch that memory",
				   ofi_comm_kind(c), c->is_send ? "to" : "from", c->peer, left,
				   l->dev->name, OFI_CLOSE_REAP_MS);
	}
}

/* The requests' references to m, which is about to be freed, are dropped (a request
 * holds its buffers' registrations' users until test() frees it or the comm closes). */
static void forget_mr(struct ofi_comm *c, struct ofi_mr *m)
{
	const struct braid_pool *reqs = &c->reqs;

	for (uint32_t i = 0; i < reqs->nelem; i++) {
		struct ofi_req *r = braid_pool_at(reqs, i);

		if (!braid_pool_is_used(reqs, i) ||
		    (r->magic != BRAID_MAGIC_REQ && r->magic != BRAID_MAGIC_FLUSH))
			continue;
		if (r->is_send && r->smr == m) {
			r->smr = NULL;
			ofi_mr_users_add(m, -1);
		}
		for (int b = 0; !r->is_send && b < r->n; b++) {
			if (ofi_req_recv(r)->mr[b] == m) {
				ofi_req_recv(r)->mr[b] = NULL;
				ofi_mr_users_add(m, -1);
			}
		}
	}
}

ncclResult_t ofi_dereg_mr(void *comm, void *mhandle)
{
	struct ofi_comm *c = to_ofi_comm(comm);
	struct ofi_mr *m = to_ofi_mr(mhandle);

	/* NCCL deregisters memory under requests only when it aborts (its progress thread
	 * joined); any other deregMr (ncclCommDeregister, on its proxy service thread while
	 * the comm runs) finds no user and touches nothing of the comm */
	if (__atomic_load_n(&m->users, __ATOMIC_RELAXED) && c &&
	    (c->magic == BRAID_MAGIC_SEND || c->magic == BRAID_MAGIC_RECV)) {
		drop_ops(c, m);
		forget_mr(c, m);
	}
	mr_free(m);
	return ncclSuccess;
}

void ofi_mr_cache_purge(struct ofi_dev *d)
{
	/* Registrations NCCL never released (it does not always, at exit). */
	braid_mr_cache_drain(&d->cache, dev_mr_release);
}
