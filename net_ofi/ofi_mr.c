// SPDX-License-Identifier: Apache-2.0
/*
 * Memory registration through the per-device cache (plugin/mr_cache.h). When the
 * provider binds MRs to endpoints (FI_MR_ENDPOINT), registrations bind to the device's
 * shared endpoint, so they are device-wide and cached all the same.
 */
#include <stdlib.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_hmem.h"
#include "plugin/cuda_dl.h"
#include "plugin/log.h"
#include "plugin/params.h"

/* ep_lock held. */
static int bind_to_ep(struct ofi_dev *d, struct fid_mr *mr)
{
	int rc;

	if (!mr || !d->mr_endpoint)
		return 0;
	rc = fi_mr_bind(mr, &d->ep->fid, 0);
	if (!rc)
		rc = fi_mr_enable(mr);
	if (rc)
		BRAID_WARN("ofi: binding a registration to the endpoint of %s failed: %s", d->name,
			   ofi_strerror(rc));
	return rc;
}

/* A registration's rc from fi_mr_reg(attr), then bound to the endpoint where the provider
 * asks (FI_MR_ENDPOINT); closed again when either failed. ep_lock held. */
static int bind_or_close(struct ofi_dev *d, int rc, struct fid_mr **mr)
{
	if (!rc)
		rc = bind_to_ep(d, *mr);
	if (rc && *mr) {
		fi_close(&(*mr)->fid);
		*mr = NULL;
	}
	return rc;
}

/* The key of a new registration: ours, unless the provider picks keys (FI_MR_PROV_KEY). */
static uint64_t next_key(struct ofi_dev *d)
{
	return d->mr_prov_key ? 0 : __atomic_fetch_add(&d->next_key, 1, __ATOMIC_RELAXED);
}

/* The shared endpoint must be open (it is once a comm exists). */
int ofi_mr_reg_raw(struct ofi_dev *d, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
		   void **desc)
{
	uint64_t key;
	int rc;

	*mr = NULL;
	*desc = NULL;
	if (!d->mr_local)
		return 0; /* the provider takes plain pointers for local buffers */
	key = next_key(d);
	pthread_mutex_lock(&d->ep_lock); /* FI_THREAD_DOMAIN: one libfabric call at a time */
	rc = bind_or_close(d, fi_mr_reg(d->domain, buf, len, access, 0, key, 0, mr, NULL), mr);
	pthread_mutex_unlock(&d->ep_lock);
	if (rc) {
		BRAID_WARN("ofi: registering %p (%zu bytes) on %s failed: %s", buf, len, d->name,
			   ofi_strerror(rc));
		*mr = NULL;
		return rc;
	}
	*desc = fi_mr_desc(*mr);
	return 0;
}

/* CUDA memory (FI_HMEM): fi_mr_regattr with iface FI_HMEM_CUDA and the buffer's device,
 * from the CUDA driver; a registration wherever the provider needs one (FI_MR_LOCAL or
 * FI_MR_HMEM). d->lock held (the cache), as for host buffers. */
static int reg_cuda(struct ofi_dev *d, void *buf, size_t len, struct fid_mr **mr, void **desc)
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
	if (!ofi_hmem_needs_registration(mr_mode, NCCL_PTR_CUDA))
		return 0;
	ofi_hmem_mr_attr(&attr, &iov, buf, len, FI_SEND | FI_RECV, next_key(d), NCCL_PTR_CUDA, dev);
	pthread_mutex_lock(&d->ep_lock);
	rc = bind_or_close(d, fi_mr_regattr(d->domain, &attr, 0, mr), mr);
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

void ofi_mr_close_raw(struct ofi_dev *d, struct fid_mr *mr)
{
	if (!mr)
		return;
	pthread_mutex_lock(&d->ep_lock);
	fi_close(&mr->fid);
	pthread_mutex_unlock(&d->ep_lock);
}

static void mr_free(struct ofi_mr *m)
{
	ofi_mr_close_raw(m->dev, m->mr);
	m->magic = BRAID_MAGIC_DEAD;
	free(m);
}

static void mr_release(struct braid_mr_range *r)
{
	mr_free(braid_container_of(r, struct ofi_mr, range));
}

ncclResult_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct ofi_comm *c = comm;
	struct ofi_dev *d = c->dev;
	int use_cache = braid_param_int(BRAID_P_MR_CACHE);
	struct braid_mr_range *hit;
	struct ofi_mr *m;
	int rc;

	if (type != NCCL_PTR_HOST &&
	    (type != NCCL_PTR_CUDA || !d->hmem_caps || !braid_cuda_available())) {
		BRAID_WARN("ofi: regMr of CUDA memory on %s, but ptrSupport did not offer it (%s)",
			   d->name,
			   d->hmem_caps ? "no CUDA driver" : "no usable FI_HMEM on this device");
		return ncclInvalidUsage;
	}
	pthread_mutex_lock(&d->lock);
	hit = use_cache ? braid_mr_cache_get(&d->cache, data, size, type) : NULL;
	if (hit) {
		pthread_mutex_unlock(&d->lock);
		*mhandle = braid_container_of(hit, struct ofi_mr, range);
		return ncclSuccess;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&d->lock);
		return ncclSystemError;
	}
	braid_mr_range_init(&m->range, data, size, type);
	m->dev = d;
	if (type == NCCL_PTR_CUDA)
		rc = reg_cuda(d, (void *)m->range.base, m->range.len, &m->mr, &m->desc);
	else
		rc = ofi_mr_reg_raw(d, (void *)m->range.base, m->range.len, FI_SEND | FI_RECV,
				    &m->mr, &m->desc);
	if (!rc && use_cache)
		rc = braid_mr_cache_add(&d->cache, &m->range);
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
	last = braid_mr_cache_put(&d->cache, &m->range);
	pthread_mutex_unlock(&d->lock);
	if (last)
		mr_free(m);
	return ncclSuccess;
}

void ofi_mr_cache_purge(struct ofi_dev *d)
{
	/* Registrations NCCL never released (it does not always, at exit). */
	braid_mr_cache_drain(&d->cache, mr_release);
}
