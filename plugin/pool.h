/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fixed-size object pool: all memory at comm creation, O(1) get/put, no malloc on the
 * data path. Not thread-safe: a pool belongs to one comm, and NCCL drives each comm from
 * one thread at a time.
 */
#ifndef BRAID_POOL_H
#define BRAID_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct braid_pool {
	char *mem;
	size_t elem_size;
	uint32_t nelem;
	uint32_t nfree;
	uint32_t *free_idx; /* stack of free element indices */
	uint8_t *used;      /* per element: 1 while handed out, to refuse double puts */
};

/* The elements' memory prefers NUMA node numa_node (-1: any): see plugin/numa.h. */
int braid_pool_init(struct braid_pool *pool, size_t elem_size, uint32_t nelem, int numa_node);
void braid_pool_fini(struct braid_pool *pool);
/* NULL when every element is in use. An element comes back as it was put, not zeroed
 * (zeroing a whole request on every message was the largest cost of irecv): the caller
 * sets every field it reads. Under ASan an element comes back filled with 0xa5. Inline,
 * as put: each message takes and gives back a request on both sides. */
static inline void *braid_pool_get(struct braid_pool *pool)
{
	uint32_t idx;
	char *elem;

	if (!pool->nfree)
		return NULL;
	idx = pool->free_idx[--pool->nfree];
	pool->used[idx] = 1;
	elem = pool->mem + (size_t)idx * pool->elem_size;
#ifdef __SANITIZE_ADDRESS__
	/* a field its caller forgets to set reads as garbage, so the tests see it, instead of
	 * reading whatever the element's last use left */
	memset(elem, 0xa5, pool->elem_size);
#endif
	return elem;
}
/* Returns -1 (and changes nothing) for a pointer that is not a used element of this pool. */
static inline int braid_pool_put(struct braid_pool *pool, void *elem)
{
	/* unsigned: an address below mem wraps to an index out of range */
	uintptr_t off = (uintptr_t)elem - (uintptr_t)pool->mem;
	size_t idx = pool->mem ? off / pool->elem_size : SIZE_MAX;

	/* a double put would corrupt the free stack: refuse it */
	if (idx >= pool->nelem || idx * pool->elem_size != off || !pool->used[idx])
		return -1;
	pool->used[idx] = 0;
	pool->free_idx[pool->nfree++] = (uint32_t)idx;
	return 0;
}
/* 1 when elem is an element of this pool (in use or not). */
int braid_pool_owns(const struct braid_pool *pool, const void *elem);
static inline uint32_t braid_pool_in_use(const struct braid_pool *pool)
{
	return pool->nelem - pool->nfree;
}
void *braid_pool_at(const struct braid_pool *pool, uint32_t idx);
/* The index of the element the next braid_pool_get hands out; UINT32_MAX: none. */
static inline uint32_t braid_pool_peek(const struct braid_pool *pool)
{
	return pool->nfree ? pool->free_idx[pool->nfree - 1] : UINT32_MAX;
}
/* The index of element elem (of this pool). */
static inline uint32_t braid_pool_index(const struct braid_pool *pool, const void *elem)
{
	return (uint32_t)((size_t)((const char *)elem - pool->mem) / pool->elem_size);
}
/* 1 while element idx is handed out (for walking live elements at teardown). */
static inline int braid_pool_is_used(const struct braid_pool *pool, uint32_t idx)
{
	return idx < pool->nelem && pool->used[idx];
}

#endif
