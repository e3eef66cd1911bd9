// SPDX-License-Identifier: Apache-2.0
/* The registration cache both backends share: page ranges, hits, references, draining. */
#include <stdlib.h>

#include "plugin/mr_cache.h"
#include "tests/unit/unit.h"

static int released;

static void count_release(struct braid_mr_range *r)
{
	released++;
	free(r);
}

static struct braid_mr_range *new_range(const void *data, size_t size, int type)
{
	struct braid_mr_range *r = malloc(sizeof(*r));

	braid_mr_range_init(r, data, size, type);
	return r;
}

static void pages_and_hits(void **state)
{
	static char buf[4 * 4096] __attribute__((aligned(4096)));
	struct braid_mr_cache c = { 0 };
	struct braid_mr_range *r = new_range(buf + 100, 5000, 1);

	(void)state;
	assert_true(r->base == (uintptr_t)buf);
	assert_int_equal(r->len, 2 * 4096);
	assert_int_equal(braid_mr_cache_add(&c, r), 0);
	/* Sub-ranges hit, with a reference each; other types and outside ranges miss. */
	assert_ptr_equal(braid_mr_cache_get(&c, buf, 8192, 1), r);
	assert_ptr_equal(braid_mr_cache_get(&c, buf + 8000, 192, 1), r);
	assert_int_equal(r->refs, 3);
	assert_null(braid_mr_cache_get(&c, buf, 16, 2));
	assert_null(braid_mr_cache_get(&c, buf + 8000, 193, 1));
	assert_null(braid_mr_cache_get(&c, buf + 3 * 4096, 1, 1));
	assert_true(braid_mr_range_covers(r, buf + 8191, 1));
	assert_false(braid_mr_range_covers(r, buf + 8191, 2));
	assert_true(braid_mr_range_covers(r, buf + 9000, 0)); /* empty: nothing to check */
	/* Wrap-around must not pass as inside. */
	assert_false(braid_mr_range_covers(r, buf + 10, SIZE_MAX - 4));
	assert_int_equal(braid_mr_cache_put(&c, r), 0);
	assert_int_equal(braid_mr_cache_put(&c, r), 0);
	assert_int_equal(braid_mr_cache_put(&c, r), 1); /* last: gone from the cache */
	assert_int_equal(c.n, 0);
	assert_null(braid_mr_cache_get(&c, buf, 1, 1));
	free(r);
	braid_mr_cache_drain(&c, count_release);
}

static void drain_releases_leftovers(void **state)
{
	static char buf[8 * 4096] __attribute__((aligned(4096)));
	struct braid_mr_cache c = { 0 };

	(void)state;
	released = 0;
	for (int i = 0; i < 40; i++) /* past the first growth of the array */
		assert_int_equal(braid_mr_cache_add(&c, new_range(buf + (i % 8) * 4096, 1, 1 + i)),
				 0);
	braid_mr_cache_drain(&c, count_release);
	assert_int_equal(released, 40);
	assert_int_equal(c.n, 0);
	assert_null(c.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pages_and_hits),
		cmocka_unit_test(drain_releases_leftovers),
	};

	return cmocka_run_group_tests_name("mr_cache", tests, NULL, NULL);
}
