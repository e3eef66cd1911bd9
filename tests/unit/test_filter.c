// SPDX-License-Identifier: Apache-2.0
/* NCCL_IB_HCA / NCCL_SOCKET_IFNAME syntax. */
#include "plugin/filter.h"
#include "tests/unit/unit.h"

static int sel(const char *spec, const char *name, int port)
{
	struct braid_filter f;

	assert_int_equal(braid_filter_parse(spec, &f), 0);
	return braid_filter_match(&f, name, port);
}

static void prefixes_ports_exclude_exact(void **state)
{
	(void)state;
	assert_true(sel(NULL, "mlx5_0", 1));
	assert_true(sel("", "eth0", -1));
	assert_true(sel("mlx5", "mlx5_3", 1));
	assert_false(sel("mlx5", "efa_0", 1));
	assert_true(sel("mlx5_0:1,mlx5_1:2", "mlx5_1", 2));
	assert_false(sel("mlx5_0:1,mlx5_1:2", "mlx5_1", 1));
	assert_false(sel("^mlx5_0", "mlx5_0", 1));
	assert_true(sel("^mlx5_0", "mlx5_1", 1));
	assert_false(sel("=mlx5_1", "mlx5_10", 1));
	assert_true(sel("=mlx5_1", "mlx5_1", 1));
	assert_true(sel("^=mlx5_1", "mlx5_10", 1));
	assert_false(sel("^=mlx5_1", "mlx5_1", 1));
	assert_true(sel("eth,ib", "ib0", -1));
}

static void bad_specs(void **state)
{
	struct braid_filter f;

	(void)state;
	assert_int_equal(braid_filter_parse("mlx5_0:", &f), -1);
	assert_int_equal(braid_filter_parse("mlx5_0:x", &f), -1);
	assert_int_equal(braid_filter_parse("mlx5_0:999", &f), -1);
	assert_int_equal(braid_filter_parse(":1", &f), -1);
	assert_int_equal(braid_filter_parse("a,,b", &f), 0);
	assert_int_equal(f.n, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(prefixes_ports_exclude_exact),
		cmocka_unit_test(bad_specs),
	};

	return cmocka_run_group_tests_name("filter", tests, NULL, NULL);
}
