// SPDX-License-Identifier: Apache-2.0
#include "plugin/mr_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

void braid_mr_range_init(struct braid_mr_range *r, const void *data, size_t size, int type)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t addr = (uintptr_t)data;

	r->base = addr & ~(page - 1);
	r->len = ((addr + size + page - 1) & ~(page - 1)) - r->base;
	if (r->len == 0)
		r->len = page;
	r->type = type;
	r->refs = 1;
}

/* Linear: a process has tens of live registrations, and this runs at regMr, not per message. */
struct braid_mr_range *braid_mr_cache_get(struct braid_mr_cache *c, const void *data, size_t size,
					  int type)
{
	for (int i = 0; i < c->n; i++) {
		struct braid_mr_range *r = c->v[i];

		if (r->type == type && braid_mr_range_covers(r, data, size)) {
			r->refs++;
			return r;
		}
	}
	return NULL;
}

int braid_mr_cache_add(struct braid_mr_cache *c, struct braid_mr_range *r)
{
	if (c->n == c->cap) {
		int cap = c->cap ? 2 * c->cap : 16;
		struct braid_mr_range **v = realloc(c->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = r;
	return 0;
}

int braid_mr_cache_put(struct braid_mr_cache *c, struct braid_mr_range *r)
{
	if (--r->refs > 0)
		return 0;
	for (int i = 0; i < c->n; i++)
		if (c->v[i] == r) {
			c->v[i] = c->v[--c->n];
			break;
		}
	if (c->n == 0) {
		/* the last one out gives the index back: with every comm closed, nothing of
		 * braid's stays grown to its busiest moment (tests/conformance mem) */
		free(c->v);
		c->v = NULL;
		c->cap = 0;
	}
	return 1;
}

int braid_mr_cache_get_or_reg(struct braid_mr_cache *c, pthread_mutex_t *lock, int use_cache,
			      const struct braid_mr_backend *b, void *dev, const void *data,
			      size_t size, int type, struct braid_mr_range **out)
{
	struct braid_mr_range *r;
	int rc;

	pthread_mutex_lock(lock);
	r = use_cache ? braid_mr_cache_get(c, data, size, type) : NULL;
	if (r) {
		pthread_mutex_unlock(lock);
		*out = r;
		return 0;
	}
	r = b->alloc();
	if (!r) {
		pthread_mutex_unlock(lock);
		return -ENOMEM;
	}
	braid_mr_range_init(r, data, size, type);
	rc = b->reg(dev, r);
	if (!rc && use_cache)
		rc = braid_mr_cache_add(c, r);
	pthread_mutex_unlock(lock);
	if (rc) {
		b->release(r);
		return rc;
	}
	*out = r;
	return 0;
}

void braid_mr_cache_unref(struct braid_mr_cache *c, pthread_mutex_t *lock,
			  const struct braid_mr_backend *b, struct braid_mr_range *r)
{
	int last;

	pthread_mutex_lock(lock);
	last = braid_mr_cache_put(c, r);
	pthread_mutex_unlock(lock);
	if (last)
		b->release(r);
}

void braid_mr_cache_drain(struct braid_mr_cache *c, void (*release)(struct braid_mr_range *r))
{
	for (int i = 0; i < c->n; i++)
		release(c->v[i]);
	free(c->v);
	c->v = NULL;
	c->n = c->cap = 0;
}
