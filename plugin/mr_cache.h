/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registration cache both backends use. NCCL registers a few large buffers and then
 * sub-ranges of them again; with regIsGlobal=1 braid promises such a call is near free,
 * so a hit is a lookup. Ranges are whole pages and reference-counted. The cache has no
 * lock of its own: the backend guards it with its device lock, which it holds anyway
 * while it registers with the NIC.
 */
#ifndef BRAID_MR_CACHE_H
#define BRAID_MR_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define braid_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - __builtin_offsetof(type, member)))

struct braid_mr_range {
	uintptr_t base;
	size_t len;
	int type; /* NCCL_PTR_HOST / NCCL_PTR_CUDA: never shared between them */
	int refs;
};

struct braid_mr_cache {
	struct braid_mr_range **v;
	int n, cap;
};

/* The whole pages around [data, data + size), one reference. */
void braid_mr_range_init(struct braid_mr_range *r, const void *data, size_t size, int type);

static inline int braid_mr_range_covers(const struct braid_mr_range *r, const void *data,
					size_t size)
{
	uintptr_t a = (uintptr_t)data;

	return !size || (a >= r->base && a - r->base <= r->len && size <= r->len - (a - r->base));
}

/* A cached range covering the buffer, with one more reference; NULL on a miss. */
struct braid_mr_range *braid_mr_cache_get(struct braid_mr_cache *c, const void *data, size_t size,
					  int type);
int braid_mr_cache_add(struct braid_mr_cache *c, struct braid_mr_range *r);
/* Drop one reference: 1 when it was the last (the range has left the cache), else 0. */
int braid_mr_cache_put(struct braid_mr_cache *c, struct braid_mr_range *r);
/*
 * What a backend gives the cache to register a buffer: alloc(), a zeroed record of its own
 * holding the range (NULL when out of memory); reg(), which registers the range's whole
 * pages on dev into the record, 0 or a negative error (with its own WARN); release(), which
 * deregisters the record if reg() got that far, and frees it.
 */
struct braid_mr_backend {
	struct braid_mr_range *(*alloc)(void);
	int (*reg)(void *dev, struct braid_mr_range *r);
	void (*release)(struct braid_mr_range *r);
};

/*
 * The buffer's registration on dev: a cached one with one more reference, or a new one
 * (cached when use_cache). lock guards c (the backend's device lock) and is held across
 * the registration. 0 and *out, or -ENOMEM, or reg()'s error.
 */
int braid_mr_cache_get_or_reg(struct braid_mr_cache *c, pthread_mutex_t *lock, int use_cache,
			      const struct braid_mr_backend *b, void *dev, const void *data,
			      size_t size, int type, struct braid_mr_range **out);
/* Drop one reference under lock; the last one deregisters (b->release). */
void braid_mr_cache_unref(struct braid_mr_cache *c, pthread_mutex_t *lock,
			  const struct braid_mr_backend *b, struct braid_mr_range *r);
/* At shutdown: hand every range still cached (NCCL does not always deregister) to release. */
void braid_mr_cache_drain(struct braid_mr_cache *c, void (*release)(struct braid_mr_range *r));

#endif
