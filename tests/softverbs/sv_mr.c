// SPDX-License-Identifier: MIT
/*
 * softverbs: protection domains and memory regions.
 *
 * An MR is a (host address, length, iova, access) record in a per-process key
 * table; lkey == rkey. Memory is never pinned or copied: the rx/tx threads of
 * this process read and write it in place when peers access it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/softverbs/sv_internal.h"

#define MR_HASH(k) ((k) % (sizeof(sv_eng.mr_hash) / sizeof(sv_eng.mr_hash[0])))

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct sv_pd *pd = calloc(1, sizeof(*pd));
	static uint32_t next_handle;

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	pthread_mutex_lock(&sv_eng.lock);
	pd->ibpd.handle = ++next_handle;
	pthread_mutex_unlock(&sv_eng.lock);
	return &pd->ibpd;
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(sv_container_of(pd, struct sv_pd, ibpd));
	return 0;
}

/* Called with sv_eng.lock held. */
struct sv_mr *sv_mr_lookup(uint32_t key)
{
	struct sv_mr *mr;

	for (mr = sv_eng.mr_hash[MR_HASH(key)]; mr; mr = mr->hnext)
		if (mr->ibmr.rkey == key)
			return mr;
	return NULL;
}

/* Called with sv_eng.lock held, before the lock is dropped for a copy through mr. */
void sv_mr_pin(struct sv_mr_pins *pins, struct sv_mr *mr)
{
	mr->pins++;
	pins->mr[pins->n++] = mr;
}

/* Called with sv_eng.lock held, once the copy through mr is over. */
void sv_mr_unpin_one(struct sv_mr *mr)
{
	if (!--mr->pins && mr->dying)
		pthread_cond_broadcast(&sv_eng.idle_cond);
}

void sv_mr_unpin(struct sv_mr_pins *pins)
{
	for (int i = 0; i < pins->n; i++)
		sv_mr_unpin_one(pins->mr[i]);
	pins->n = 0;
}

/* Host pointer for [addr, addr + len) of mr, or NULL when out of bounds.
 * Remote addresses are iova-based, local SGE addresses are host addresses. */
void *sv_mr_translate(struct sv_mr *mr, uint64_t addr, uint64_t len, bool by_iova)
{
	uint64_t base = by_iova || mr->dmabuf_map ? mr->iova : (uint64_t)(uintptr_t)mr->ibmr.addr;

	if (addr < base || len > mr->ibmr.length || addr - base > mr->ibmr.length - len)
		return NULL;
	return (char *)mr->ibmr.addr + (addr - base);
}

static struct ibv_mr *sv_reg(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			     unsigned int access)
{
	const unsigned int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				   IBV_ACCESS_ZERO_BASED | IBV_ACCESS_RELAXED_ORDERING |
				   IBV_ACCESS_OPTIONAL_RANGE;
	struct sv_mr *mr;
	uint32_t key;

	if ((access & ~known) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    (!addr && length)) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&sv_eng.lock);
	sv_eng.nreg++;
	if (sv_eng.cfg.fault_fail_reg && sv_eng.nreg == sv_eng.cfg.fault_fail_reg) {
		pthread_mutex_unlock(&sv_eng.lock);
		sv_debug("fault: failing registration %ld", sv_eng.nreg);
		errno = ENOMEM;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		pthread_mutex_unlock(&sv_eng.lock);
		errno = ENOMEM;
		return NULL;
	}
	do {
		key = ++sv_eng.next_key;
	} while (key == 0 || sv_mr_lookup(key));
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = key;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->access = access;
	mr->hnext = sv_eng.mr_hash[MR_HASH(key)];
	sv_eng.mr_hash[MR_HASH(key)] = mr;
	pthread_mutex_unlock(&sv_eng.lock);
	sv_debug("MR 0x%x: %zu bytes, access 0x%x%s", key, length, access,
		 access & IBV_ACCESS_RELAXED_ORDERING ? " (relaxed ordering)" : "");
	return &mr->ibmr;
}

#undef ibv_reg_mr
SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return sv_reg(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

#undef ibv_reg_mr_iova
SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return sv_reg(pd, addr, length, iova, (unsigned int)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	return sv_reg(pd, addr, length, iova, access);
}

/*
 * By default no dma-buf support: the call fails with EOPNOTSUPP, as on a kernel or driver
 * without it. With SOFTVERBS_DMABUF=1 it answers like an mlx5 that supports dma-buf: a bad
 * fd (the fd -1 probe of NCCL and braid) fails with EBADF, an fd that is no dma-buf with
 * EINVAL, and an fd that can be mapped (the CUDA stand-in's memfd, tests/cuda) is mapped
 * at offset: the MR then reads and writes the exporter's own pages. As on a real device,
 * the MR's addresses, local and remote, are iovas.
 */
SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), skew = offset % page;
	struct ibv_mr *ibmr;
	struct sv_mr *mr;
	void *map;

	if (!sv_eng.cfg.dmabuf) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
		errno = EBADF;
		return NULL;
	}
	if (!length || (access & IBV_ACCESS_ZERO_BASED)) {
		errno = EINVAL;
		return NULL;
	}
	map = mmap(NULL, length + skew, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   (off_t)(offset - skew));
	if (map == MAP_FAILED) {
		errno = EINVAL; /* the kernel's answer for an fd that is no dma-buf */
		return NULL;
	}
	ibmr = sv_reg(pd, (char *)map + skew, length, iova, (unsigned int)access);
	if (!ibmr) {
		int err = errno;

		munmap(map, length + skew);
		errno = err;
		return NULL;
	}
	mr = sv_container_of(ibmr, struct sv_mr, ibmr);
	mr->dmabuf_map = map;
	mr->dmabuf_len = length + skew;
	return ibmr;
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sv_mr *mr = sv_container_of(ibmr, struct sv_mr, ibmr);
	struct sv_mr **pp;

	pthread_mutex_lock(&sv_eng.lock);
	for (pp = &sv_eng.mr_hash[MR_HASH(ibmr->rkey)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == mr) {
			*pp = mr->hnext;
			break;
		}
	}
	/* Unhashed, no new copy finds it; one under way may still be reading
	 * or writing the memory. Each ends by itself: a peer's engine reads
	 * every byte sent to it and never waits for a dereg. */
	mr->dying = true;
	while (mr->pins)
		pthread_cond_wait(&sv_eng.idle_cond, &sv_eng.lock);
	pthread_mutex_unlock(&sv_eng.lock);
	if (mr->dmabuf_map)
		munmap(mr->dmabuf_map, mr->dmabuf_len);
	free(mr);
	return 0;
}
