// SPDX-License-Identifier: Apache-2.0
/* Request pools: fixed size, O(1), misuse refused. */
#include <string.h>

#include "plugin/pool.h"
#include "tests/unit/unit.h"

struct item {
	uint64_t a, b;
	char pad[40];
};

static void get_all_then_exhausted(void **state)
{
	struct braid_pool p;
	struct item *got[32];

	(void)state;
	assert_int_equal(braid_pool_init(&p, sizeof(struct item), 32, -1), 0);
	for (int i = 0; i < 32; i++) {
		got[i] = braid_pool_get(&p);
		assert_non_null(got[i]);
		assert_true(braid_pool_owns(&p, got[i]));
		assert_int_equal(((uintptr_t)got[i]) % 64, 0);
		for (int j = 0; j < i; j++)
			assert_ptr_not_equal(got[i], got[j]);
		memset(got[i], 0xff, sizeof(*got[i]));
	}
	assert_int_equal(braid_pool_in_use(&p), 32);
	assert_null(braid_pool_get(&p));
	assert_int_equal(braid_pool_put(&p, got[5]), 0);
	struct item *again = braid_pool_get(&p);
	assert_ptr_equal(again, got[5]); /* the most recently put, warm in cache */
	braid_pool_fini(&p);
}

static void misuse_is_refused(void **state)
{
	struct braid_pool p;
	struct item outside;
	struct item *it;

	(void)state;
	assert_int_equal(braid_pool_init(&p, sizeof(struct item), 4, 0), 0);
	it = braid_pool_get(&p);
	assert_int_equal(braid_pool_put(&p, &outside), -1);
	assert_int_equal(braid_pool_put(&p, (char *)it + 1), -1);
	assert_int_equal(braid_pool_put(&p, it), 0);
	assert_int_equal(braid_pool_put(&p, it), -1); /* double put */
	assert_int_equal(braid_pool_in_use(&p), 0);
	braid_pool_fini(&p);
	assert_int_equal(braid_pool_init(&p, 0, 4, -1), -22);
	assert_int_equal(braid_pool_init(&p, 8, 0, -1), -22);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(get_all_then_exhausted),
		cmocka_unit_test(misuse_is_refused),
	};

	return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
