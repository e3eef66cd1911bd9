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

/* NCCL 2.30's NCCL_IB_HCA entries: hca:port:rail:plane, empty fields (before a given
 * one) and -1 meaning "not given" (src/misc/utils.cc, parseStringList). */
static void rails_and_planes(void **state)
{
	struct braid_filter f;

	(void)state;
	assert_int_equal(braid_filter_parse("=mlx5_0:1:3:0,mlx5_1::4:1,mlx5_2:2:5,mlx5_3", &f), 0);
	assert_int_equal(f.n, 4);
	assert_true(f.item[0].port == 1 && f.item[0].rail == 3 && f.item[0].plane == 0);
	assert_true(f.item[1].port == -1 && f.item[1].rail == 4 && f.item[1].plane == 1);
	assert_true(f.item[2].port == 2 && f.item[2].rail == 5 && f.item[2].plane == -1);
	assert_true(f.item[3].port == -1 && f.item[3].rail == -1 && f.item[3].plane == -1);
	assert_int_equal(braid_filter_parse("mlx5_0:1:-1:7,mlx5_1:::2", &f), 0);
	assert_true(f.item[0].rail == -1 && f.item[0].plane == 7);
	assert_true(f.item[1].port == -1 && f.item[1].rail == -1 && f.item[1].plane == 2);
	assert_int_equal(braid_filter_parse("mlx5_0:1:32767:16383", &f), 0);
	/* selection is as before: rail and plane do not take part */
	assert_true(braid_filter_match(&f, "mlx5_0", 1));
	assert_false(braid_filter_match(&f, "mlx5_0", 2));
	/* the entry: the first that matches; none in an exclude list */
	assert_int_equal(braid_filter_parse("mlx5:1:1:1,mlx5_0:1:2:2", &f), 0);
	assert_int_equal(braid_filter_entry(&f, "mlx5_0", 1), 0);
	assert_int_equal(braid_filter_parse("mlx5_1,mlx5_0:1:2:2", &f), 0);
	assert_int_equal(braid_filter_entry(&f, "mlx5_0", 1), 1);
	assert_int_equal(braid_filter_entry(&f, "efa_0", 1), -1);
	assert_int_equal(braid_filter_parse("^mlx5_0:1:2:2", &f), 0);
	assert_int_equal(braid_filter_entry(&f, "mlx5_0", 1), -1);
	assert_int_equal(braid_filter_entry(&f, "mlx5_1", 1), -1);

	assert_int_equal(braid_filter_parse("mlx5_0:1:3:0:1", &f), -1); /* a fifth field */
	assert_int_equal(braid_filter_parse("mlx5_0:1:", &f), -1);      /* trailing empty */
	assert_int_equal(braid_filter_parse("mlx5_0:1:3:", &f), -1);
	assert_int_equal(braid_filter_parse("mlx5_0:1:x", &f), -1);
	assert_int_equal(braid_filter_parse("mlx5_0:1:3:y", &f), -1);
	assert_int_equal(braid_filter_parse("mlx5_0:1:32768", &f), -1);   /* int16_t railId */
	assert_int_equal(braid_filter_parse("mlx5_0:1:0:16384", &f), -1); /* NCCL's virtual bit */
	assert_int_equal(braid_filter_parse("mlx5_0:1:-2", &f), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(prefixes_ports_exclude_exact),
		cmocka_unit_test(bad_specs),
		cmocka_unit_test(rails_and_planes),
	};

	return cmocka_run_group_tests_name("filter", tests, NULL, NULL);
}
