// SPDX-License-Identifier: Apache-2.0
/*
 * Memory registration with a per-device cache: NCCL registers a few large buffers and
 * then sub-ranges of them again, so a hit must be a lookup, not a provider call
 * (regIsGlobal=1 promises that). When the provider binds MRs to endpoints
 * (FI_MR_ENDPOINT) a registration belongs to one comm and is not cached.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "plugin/log.h"
#include "plugin/params.h"

int ofi_mr_reg_raw(struct ofi_dev *d, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
		   void **desc)
{
	uint64_t key = 0;
	int rc;

	*mr = NULL;
	*desc = NULL;
	if (!d->mr_local)
		return 0; /* the provider takes plain pointers for local buffers */
	if (!d->mr_prov_key)
		key = __atomic_fetch_add(&d->next_key, 1, __ATOMIC_RELAXED);
	rc = fi_mr_reg(d->domain, buf, len, access, 0, key, 0, mr, NULL);
	if (rc) {
		BRAID_WARN("ofi: fi_mr_reg(%p, %zu bytes) on %s failed: %s", buf, len, d->name,
			   ofi_strerror(rc));
		*mr = NULL;
		return rc;
	}
	*desc = fi_mr_desc(*mr);
	return 0;
}

static int bind_to_ep(struct ofi_dev *d, struct fid_mr *mr, struct fid_ep *ep)
{
	int rc;

	if (!mr || !d->mr_endpoint)
		return 0;
	rc = fi_mr_bind(mr, &ep->fid, 0);
	if (!rc)
		rc = fi_mr_enable(mr);
	if (rc)
		BRAID_WARN("ofi: binding a registration to its endpoint on %s failed: %s", d->name,
			   ofi_strerror(rc));
	return rc;
}

/* Cache lookup; caller holds d->lock. */
static struct ofi_mr *cache_find(struct ofi_dev *d, uintptr_t addr, size_t size, int type)
{
	for (int i = 0; i < d->ncache; i++) {
		struct ofi_mr *m = d->cache[i];

		if (m->type == type && addr >= m->base && addr + size <= m->base + m->len)
			return m;
	}
	return NULL;
}

static int cache_insert(struct ofi_dev *d, struct ofi_mr *m)
{
	if (d->ncache == d->cache_cap) {
		int cap = d->cache_cap ? 2 * d->cache_cap : 16;
		struct ofi_mr **n = realloc(d->cache, (size_t)cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		d->cache = n;
		d->cache_cap = cap;
	}
	d->cache[d->ncache++] = m;
	return 0;
}

static void cache_remove(struct ofi_dev *d, struct ofi_mr *m)
{
	for (int i = 0; i < d->ncache; i++)
		if (d->cache[i] == m) {
			d->cache[i] = d->cache[--d->ncache];
			return;
		}
}

static void mr_free(struct ofi_mr *m)
{
	if (m->mr)
		fi_close(&m->mr->fid);
	m->magic = BRAID_MAGIC_DEAD;
	free(m);
}

ncclResult_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct ofi_comm *c = comm;
	struct ofi_dev *d = c->dev;
	int use_cache = !d->mr_endpoint && braid_param_int(BRAID_P_MR_CACHE);
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t addr = (uintptr_t)data;
	struct ofi_mr *m;
	int rc;

	if (type != NCCL_PTR_HOST) {
		BRAID_WARN("ofi: regMr of CUDA memory on %s, but ptrSupport did not offer it", d->name);
		return ncclInvalidUsage;
	}
	pthread_mutex_lock(&d->lock);
	if (use_cache) {
		m = cache_find(d, addr, size, type);
		if (m) {
			m->refs++;
			pthread_mutex_unlock(&d->lock);
			*mhandle = m;
			return ncclSuccess;
		}
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&d->lock);
		return ncclSystemError;
	}
	/* Whole pages: later sub-range registrations of the same buffer then hit. */
	m->base = addr & ~(page - 1);
	m->len = ((addr + size + page - 1) & ~(page - 1)) - m->base;
	if (m->len == 0)
		m->len = page;
	m->type = type;
	m->dev = d;
	m->refs = 1;
	rc = ofi_mr_reg_raw(d, (void *)m->base, m->len, FI_SEND | FI_RECV, &m->mr, &m->desc);
	if (!rc)
		rc = bind_to_ep(d, m->mr, c->ep);
	if (!rc && use_cache)
		rc = cache_insert(d, m);
	pthread_mutex_unlock(&d->lock);
	if (rc) {
		mr_free(m);
		return ncclSystemError;
	}
	m->magic = BRAID_MAGIC_MR;
	*mhandle = m;
	return ncclSuccess;
}

ncclResult_t ofi_dereg_mr(void *comm, void *mhandle)
{
	struct ofi_mr *m = mhandle;
	struct ofi_dev *d = m->dev;
	int last;

	(void)comm;
	pthread_mutex_lock(&d->lock);
	last = --m->refs == 0;
	if (last)
		cache_remove(d, m);
	pthread_mutex_unlock(&d->lock);
	if (last)
		mr_free(m);
	return ncclSuccess;
}

void ofi_mr_cache_purge(struct ofi_dev *d)
{
	/* Registrations NCCL never released (it does not always, at exit). */
	for (int i = 0; i < d->ncache; i++)
		mr_free(d->cache[i]);
	d->ncache = 0;
}
