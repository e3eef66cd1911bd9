// SPDX-License-Identifier: Apache-2.0
/* Memory near the NIC: the kernel must record the NUMA preference braid asked for. */
#include <errno.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugin/numa.h"
#include "plugin/pool.h"
#include "tests/unit/unit.h"

/* Why a check could not run here; main then exits 77 (skipped), not 0: a skip is no pass. */
static const char *skipped;

/* The policy of the page at addr: MPOL_* and the node mask; -errno when not readable. */
static int policy_of(void *addr, unsigned long *mask)
{
	int mode = -1;

	*mask = 0;
	if (syscall(SYS_get_mempolicy, &mode, mask, 64UL, addr, (unsigned long)MPOL_F_ADDR))
		return -errno;
	return mode;
}

static void prefers_the_node(void **state)
{
	unsigned long mask;
	char *p = braid_numa_alloc(3 * 4096 + 5, 0);
	int mode;

	(void)state;
	assert_non_null(p);
	for (size_t i = 0; i < 3 * 4096 + 5; i++)
		assert_int_equal(p[i], 0);
	mode = policy_of(p + 4096, &mask);
	if (mode == -EPERM || mode == -ENOSYS) {
		braid_numa_free(p, 3 * 4096 + 5);
		skipped = "get_mempolicy is refused here (a sandbox?): NUMA preferences not checked";
		skip();
	}
	assert_int_equal(mode, MPOL_PREFERRED);
	assert_int_equal(mask, 1UL);
	braid_numa_free(p, 3 * 4096 + 5);

	p = braid_numa_alloc(100, -1);
	assert_non_null(p);
	assert_int_equal(policy_of(p, &mask), MPOL_DEFAULT);
	braid_numa_free(p, 100);
}

static void pools_take_the_node(void **state)
{
	struct braid_pool pool;
	unsigned long mask;
	int mode;

	(void)state;
	assert_int_equal(braid_pool_init(&pool, 200, 64, 0), 0);
	mode = policy_of(pool.mem, &mask);
	if (mode == -EPERM || mode == -ENOSYS) {
		braid_pool_fini(&pool);
		skipped = "get_mempolicy is refused here (a sandbox?): NUMA preferences not checked";
		skip();
	}
	assert_int_equal(mode, MPOL_PREFERRED);
	braid_pool_fini(&pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(prefers_the_node),
		cmocka_unit_test(pools_take_the_node),
	};

	int failed = cmocka_run_group_tests_name("numa", tests, NULL, NULL);

	if (!failed && skipped) {
		printf("SKIP: %s\n", skipped);
		return 77;
	}
	return failed;
}
