// SPDX-License-Identifier: Apache-2.0
/*
 * Memory registration with a per-HCA cache (regIsGlobal=1: a regMr of a sub-range of a
 * registered buffer is a lookup under the HCA lock). Host and, with nvidia_peermem, CUDA
 * memory go through ibv_reg_mr (CUDA memory without peer memory is refused); dma-buf
 * through ibv_reg_dmabuf_mr (never cached: NCCL closes the fd after the call, and offsets
 * make ranges incomparable). A comm over several NICs registers on each NIC's HCA and
 * hands NCCL a handle of its own that holds the parts (ib.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_ib/ib.h"
#include "plugin/log.h"
#include "plugin/params.h"

int ib_access_flags(void)
{
	return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	       (ib.relaxed_ordering ? IBV_ACCESS_RELAXED_ORDERING : 0);
}

/* NCCL's rule (ncclIbRelaxedOrderingCapable): asked for (NCCL_IB_PCI_RELAXED_ORDERING 1,
 * or 2, the default) and ibv_reg_mr_iova2 exists (IBVERBS_1.8, the API that passes the
 * optional access flags on). A NIC that cannot do it ignores the optional flag. */
void ib_relaxed_ordering_init(void)
{
	ib.relaxed_ordering = braid_param_int(BRAID_P_IB_PCI_RELAXED_ORDERING) != 0 &&
			      ibv.reg_mr_iova2 != NULL;
}

static struct ibv_mr *reg_pages(struct ib_hca *h, uintptr_t base, size_t len)
{
	if (ib.relaxed_ordering)
		return ibv.reg_mr_iova2(h->pd, (void *)base, len, base,
					(unsigned int)ib_access_flags());
	return ibv.reg_mr(h->pd, (void *)base, len, ib_access_flags());
}

static void mr_free(struct ib_mr *m)
{
	if (m->mr)
		ibv.dereg_mr(m->mr);
	m->magic = BRAID_MAGIC_DEAD;
	free(m);
}

static void mr_release(struct braid_mr_range *r)
{
	mr_free(braid_container_of(r, struct ib_mr, range));
}

/* The cache's registration of r's pages on HCA dev (braid_mr_backend). */
static int reg_range(void *dev, struct braid_mr_range *r)
{
	struct ib_mr *m = braid_container_of(r, struct ib_mr, range);
	struct ib_hca *h = dev;
	int rc;

	m->hca = h;
	m->mr = reg_pages(h, r->base, r->len);
	if (m->mr)
		return 0;
	rc = errno ? errno : EIO;
	BRAID_WARN("ib: ibv_reg_mr(%p, %zu bytes, %s) on %s failed: %s", (void *)r->base, r->len,
		   r->type == NCCL_PTR_CUDA ? "CUDA" : "host", h->name, strerror(rc));
	return -rc;
}

static struct braid_mr_range *mr_alloc(void)
{
	struct ib_mr *m = calloc(1, sizeof(*m));

	/* cppcheck-suppress memleak ; the record is reached through its range (container_of) */
	return m ? &m->range : NULL;
}

static const struct braid_mr_backend ib_mr_backend = {
	.alloc = mr_alloc,
	.reg = reg_range,
	.release = mr_release,
};

static ncclResult_t reg_host(struct ib_hca *h, void *data, size_t size, int type,
			     struct ib_mr **mhandle)
{
	struct braid_mr_range *r;
	struct ib_mr *m;

	if (type == NCCL_PTR_CUDA && !h->gdr_peermem) {
		/* Registering it anyway would pin whatever host pages the address maps, not
		 * the GPU's memory. */
		BRAID_WARN("ib: regMr(NCCL_PTR_CUDA) on %s refused: no GPU peer memory "
			   "(nvidia_peermem is not loaded), so ptrSupport does not offer CUDA%s",
			   h->name,
			   h->gdr_dmabuf ? "; the device does dma-buf: NCCL registers CUDA buffers "
					   "with regMrDmaBuf unless NCCL_DMABUF_ENABLE=0"
					 : "");
		return ncclInvalidUsage;
	}
	if (braid_mr_cache_get_or_reg(&h->cache, &h->lock, (int)braid_param_int(BRAID_P_MR_CACHE),
				      &ib_mr_backend, h, data, size, type, &r))
		return ncclSystemError;
	m = braid_container_of(r, struct ib_mr, range);
	m->magic = BRAID_MAGIC_MR;
	*mhandle = m;
	return ncclSuccess;
}

/* On device d's HCA; for its data-direct path when d is the data-direct device, as NCCL's
 * reg.cc registers. */
static ncclResult_t reg_dmabuf(const struct ib_dev *d, void *data, size_t size, int type,
			       uint64_t offset, int fd, struct ib_mr **mhandle)
{
	struct ib_hca *h = d->hca;
	struct ib_mr *m;

	if (!h->gdr_dmabuf || !ibv.reg_dmabuf_mr) {
		BRAID_WARN("ib: regMrDmaBuf on %s, which has no dma-buf support (ptrSupport did not "
			   "offer it)",
			   h->name);
		return ncclInvalidUsage;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return ncclSystemError;
	/* The exact range: dma-buf registrations are never cached or widened. */
	m->range = (struct braid_mr_range){ .base = (uintptr_t)data,
					    .len = size,
					    .type = type,
					    .refs = 1 };
	m->dmabuf = 1;
	m->hca = h;
	if (d->data_direct)
		m->mr = ib_mlx5_reg_dmabuf_dd(h->pd, offset, size, (uint64_t)(uintptr_t)data, fd,
					      ib_access_flags());
	else
		m->mr = ibv.reg_dmabuf_mr(h->pd, offset, size, (uint64_t)(uintptr_t)data, fd,
					  ib_access_flags());
	if (!m->mr) {
		BRAID_WARN("ib: %s(fd %d, offset %llu, %zu bytes) on %s failed: %s",
			   d->data_direct ? "mlx5dv_reg_dmabuf_mr (data direct)"
					  : "ibv_reg_dmabuf_mr",
			   fd, (unsigned long long)offset, size, d->name, strerror(errno));
		free(m);
		return ncclSystemError;
	}
	m->magic = BRAID_MAGIC_MR;
	*mhandle = m;
	return ncclSuccess;
}

static void put_one(struct ib_mr *m)
{
	/* dma-buf: not in the cache, just counted */
	braid_mr_cache_unref(&m->hca->cache, &m->hca->lock, &ib_mr_backend, &m->range);
}

/* The handle of a comm over several NICs: one registration per rail, or the first error. */
static ncclResult_t reg_rails(struct ib_comm *c, void *data, size_t size, int type, uint64_t offset,
			      int fd, void **mhandle)
{
	struct ib_mr *w = calloc(1, sizeof(*w));
	ncclResult_t rc = ncclSuccess;

	if (!w)
		return ncclSystemError;
	braid_mr_range_init(&w->range, data, size, type);
	for (int k = 0; k < c->nrails && rc == ncclSuccess; k++) {
		rc = fd >= 0 ? reg_dmabuf(c->rails[k].dev, data, size, type, offset, fd,
					  &w->part[k])
			     : reg_host(c->rails[k].hca, data, size, type, &w->part[k]);
		if (rc == ncclSuccess)
			w->nparts = k + 1;
	}
	if (rc != ncclSuccess) {
		for (int k = 0; k < w->nparts; k++)
			put_one(w->part[k]);
		free(w);
		return rc;
	}
	w->dmabuf = fd >= 0;
	w->magic = BRAID_MAGIC_MR;
	*mhandle = w;
	return ncclSuccess;
}

ncclResult_t ib_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct ib_comm *c = to_ib_comm(comm);

	if (c->nrails > 1)
		return reg_rails(c, data, size, type, 0, -1, mhandle);
	return reg_host(c->hca, data, size, type, (struct ib_mr **)mhandle);
}

ncclResult_t ib_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			      int fd, void **mhandle)
{
	struct ib_comm *c = to_ib_comm(comm);

	if (fd < 0)
		return ib_reg_mr(comm, data, size, type, mhandle);
	if (c->nrails > 1)
		return reg_rails(c, data, size, type, offset, fd, mhandle);
	return reg_dmabuf(c->dev, data, size, type, offset, fd, (struct ib_mr **)mhandle);
}

ncclResult_t ib_dereg_mr(void *comm, void *mhandle)
{
	struct ib_mr *m = mhandle;

	(void)comm;
	if (!m->nparts) {
		put_one(m);
		return ncclSuccess;
	}
	for (int k = 0; k < m->nparts; k++)
		put_one(m->part[k]);
	m->magic = BRAID_MAGIC_DEAD;
	free(m);
	return ncclSuccess;
}

void ib_mr_cache_purge(struct ib_hca *h)
{
	/* Registrations NCCL never released (it does not always, at exit). */
	braid_mr_cache_drain(&h->cache, mr_release);
}
