// SPDX-License-Identifier: Apache-2.0
#include "plugin/pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/numa.h"

int braid_pool_init(struct braid_pool *pool, size_t elem_size, uint32_t nelem, int numa_node)
{
	memset(pool, 0, sizeof(*pool));
	if (!elem_size || !nelem)
		return -EINVAL;
	/* Keep every element aligned for any member type. */
	elem_size = (elem_size + 63) & ~(size_t)63;
	/* Sized first: fini frees by them, also after a partial failure here. */
	pool->elem_size = elem_size;
	pool->nelem = nelem;
	pool->mem = braid_numa_alloc(elem_size * nelem, numa_node);
	pool->free_idx = calloc(nelem, sizeof(*pool->free_idx));
	pool->used = calloc(nelem, 1);
	if (!pool->mem || !pool->free_idx || !pool->used) {
		braid_pool_fini(pool);
		return -ENOMEM;
	}
	pool->nfree = nelem;
	/* Lowest index on top, so the first gets are elements 0, 1, ... */
	for (uint32_t i = 0; i < nelem; i++)
		pool->free_idx[i] = nelem - 1 - i;
	return 0;
}

void braid_pool_fini(struct braid_pool *pool)
{
	braid_numa_free(pool->mem, pool->elem_size * pool->nelem);
	free(pool->free_idx);
	free(pool->used);
	memset(pool, 0, sizeof(*pool));
}

void *braid_pool_at(const struct braid_pool *pool, uint32_t idx)
{
	return idx < pool->nelem ? pool->mem + (size_t)idx * pool->elem_size : NULL;
}

int braid_pool_owns(const struct braid_pool *pool, const void *elem)
{
	const char *p = elem;

	if (!pool->mem || p < pool->mem || p >= pool->mem + pool->elem_size * pool->nelem)
		return 0;
	return (size_t)(p - pool->mem) % pool->elem_size == 0;
}
