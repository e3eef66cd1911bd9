// SPDX-License-Identifier: Apache-2.0
/*
 * Memory registration with a per-HCA cache (regIsGlobal=1: a regMr of a sub-range of a
 * registered buffer is a lookup under the HCA lock). Host and, with nvidia_peermem, CUDA
 * memory go through ibv_reg_mr; dma-buf through ibv_reg_dmabuf_mr (never cached: NCCL
 * closes the fd after the call, and offsets make ranges incomparable).
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
	return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}

static struct ib_mr *cache_find(struct ib_hca *h, uintptr_t addr, size_t size, int type)
{
	for (int i = 0; i < h->ncache; i++) {
		struct ib_mr *m = h->cache[i];

		if (m->type == type && addr >= m->base && addr + size <= m->base + m->len)
			return m;
	}
	return NULL;
}

static int cache_insert(struct ib_hca *h, struct ib_mr *m)
{
	if (h->ncache == h->cache_cap) {
		int cap = h->cache_cap ? 2 * h->cache_cap : 16;
		struct ib_mr **n = realloc(h->cache, (size_t)cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		h->cache = n;
		h->cache_cap = cap;
	}
	h->cache[h->ncache++] = m;
	return 0;
}

static void cache_remove(struct ib_hca *h, struct ib_mr *m)
{
	for (int i = 0; i < h->ncache; i++)
		if (h->cache[i] == m) {
			h->cache[i] = h->cache[--h->ncache];
			return;
		}
}

static void mr_free(struct ib_mr *m)
{
	if (m->mr)
		ibv.dereg_mr(m->mr);
	m->magic = BRAID_MAGIC_DEAD;
	free(m);
}

ncclResult_t ib_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct ib_comm *c = comm;
	struct ib_hca *h = c->hca;
	int use_cache = (int)braid_param_int(BRAID_P_MR_CACHE);
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t addr = (uintptr_t)data;
	struct ib_mr *m;
	int rc = 0;

	if (type == NCCL_PTR_CUDA && !h->gdr_peermem) {
		BRAID_WARN("ib: regMr of CUDA memory on %s without nvidia_peermem (ptrSupport did not "
			   "offer it)", h->name);
		return ncclInvalidUsage;
	}
	pthread_mutex_lock(&h->lock);
	if (use_cache) {
		m = cache_find(h, addr, size, type);
		if (m) {
			m->refs++;
			pthread_mutex_unlock(&h->lock);
			*mhandle = m;
			return ncclSuccess;
		}
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&h->lock);
		return ncclSystemError;
	}
	/* Whole pages: later sub-range registrations of the same buffer then hit. */
	m->base = addr & ~(page - 1);
	m->len = ((addr + size + page - 1) & ~(page - 1)) - m->base;
	if (m->len == 0)
		m->len = page;
	m->type = type;
	m->hca = h;
	m->refs = 1;
	m->mr = ibv.reg_mr(h->pd, (void *)m->base, m->len, ib_access_flags());
	if (!m->mr) {
		rc = errno ? errno : EIO;
		BRAID_WARN("ib: ibv_reg_mr(%p, %zu bytes, %s) on %s failed: %s", (void *)m->base,
			   m->len, type == NCCL_PTR_CUDA ? "CUDA" : "host", h->name, strerror(rc));
	}
	if (!rc && use_cache)
		rc = cache_insert(h, m);
	pthread_mutex_unlock(&h->lock);
	if (rc) {
		mr_free(m);
		return ncclSystemError;
	}
	m->magic = BRAID_MAGIC_MR;
	*mhandle = m;
	return ncclSuccess;
}

ncclResult_t ib_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			      int fd, void **mhandle)
{
	struct ib_comm *c = comm;
	struct ib_hca *h = c->hca;
	struct ib_mr *m;

	if (fd < 0)
		return ib_reg_mr(comm, data, size, type, mhandle);
	if (!h->gdr_dmabuf || !ibv.reg_dmabuf_mr) {
		BRAID_WARN("ib: regMrDmaBuf on %s, which has no dma-buf support (ptrSupport did not "
			   "offer it)", h->name);
		return ncclInvalidUsage;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return ncclSystemError;
	m->base = (uintptr_t)data;
	m->len = size;
	m->type = type;
	m->dmabuf = 1;
	m->hca = h;
	m->refs = 1;
	m->mr = ibv.reg_dmabuf_mr(h->pd, offset, size, (uint64_t)(uintptr_t)data, fd,
				  ib_access_flags());
	if (!m->mr) {
		BRAID_WARN("ib: ibv_reg_dmabuf_mr(fd %d, offset %llu, %zu bytes) on %s failed: %s",
			   fd, (unsigned long long)offset, size, h->name, strerror(errno));
		free(m);
		return ncclSystemError;
	}
	m->magic = BRAID_MAGIC_MR;
	*mhandle = m;
	return ncclSuccess;
}

ncclResult_t ib_dereg_mr(void *comm, void *mhandle)
{
	struct ib_mr *m = mhandle;
	struct ib_hca *h = m->hca;
	int last;

	(void)comm;
	pthread_mutex_lock(&h->lock);
	last = --m->refs == 0;
	if (last && !m->dmabuf)
		cache_remove(h, m);
	pthread_mutex_unlock(&h->lock);
	if (last)
		mr_free(m);
	return ncclSuccess;
}

void ib_mr_cache_purge(struct ib_hca *h)
{
	/* Registrations NCCL never released (it does not always, at exit). */
	for (int i = 0; i < h->ncache; i++)
		mr_free(h->cache[i]);
	h->ncache = 0;
}
