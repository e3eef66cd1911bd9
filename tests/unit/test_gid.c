// SPDX-License-Identifier: Apache-2.0
/*
 * The RoCE GID choice that net_ib and `braid doctor` share (plugin/gid.h), on GID tables
 * as mlx5 ports show them (link-local v1/v2, then each IPv4 address as v1/v2), and the
 * peer-memory files (plugin/peermem.h) under a root directory.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/gid.h"
#include "plugin/params.h"
#include "plugin/peermem.h"
#include "tests/unit/unit.h"

static struct braid_gid_entry entry(int index, const char *addr, int type)
{
	struct braid_gid_entry e = { .index = index, .type = type };

	assert_int_equal(inet_pton(AF_INET6, addr, e.raw), 1);
	return e;
}

/* mlx5 with 10.0.0.1 and 192.168.7.1: indexes 0..5 */
static int two_v4(struct braid_gid_entry *g)
{
	g[0] = entry(0, "fe80::a00:27ff:fe00:1", BRAID_GID_ROCE_V1);
	g[1] = entry(1, "fe80::a00:27ff:fe00:1", BRAID_GID_ROCE_V2);
	g[2] = entry(2, "::ffff:10.0.0.1", BRAID_GID_ROCE_V1);
	g[3] = entry(3, "::ffff:10.0.0.1", BRAID_GID_ROCE_V2);
	g[4] = entry(4, "::ffff:192.168.7.1", BRAID_GID_ROCE_V1);
	g[5] = entry(5, "::ffff:192.168.7.1", BRAID_GID_ROCE_V2);
	return 6;
}

static int pick_index(const struct braid_gid_entry *g, int n, int want, int family,
		      const char *range, struct braid_gid_pick *p)
{
	struct braid_gid_rule r = { .want_index = want, .family = family, .range = range };

	braid_gid_choose(g, n, &r, p);
	return p->pos < 0 ? -1 : g[p->pos].index;
}

static void first_ipv4_roce_v2(void **state)
{
	struct braid_gid_entry g[8];
	struct braid_gid_pick p;
	int n = two_v4(g);

	(void)state;
	assert_int_equal(pick_index(g, n, -1, AF_INET, NULL, &p), 3);
	assert_false(p.version_fallback);
	assert_string_equal(p.why, "first RoCEv2 IPv4 GID (skipped 0 link-local, 1 link-local, "
				   "2 RoCEv1)");
	assert_int_equal(pick_index(g, n, -1, AF_INET, "", &p), 3);
}

static void addr_range_narrows(void **state)
{
	struct braid_gid_entry g[8];
	struct braid_gid_pick p;
	int n = two_v4(g);

	(void)state;
	assert_int_equal(pick_index(g, n, -1, AF_INET, "192.168.0.0/16", &p), 5);
	assert_string_equal(p.why, "first RoCEv2 IPv4 GID in 192.168.0.0/16 (skipped 0 "
				   "link-local, 1 link-local, 2 range, 3 range, 4 RoCEv1)");
	assert_int_equal(pick_index(g, n, -1, AF_INET, "10.0.0.1/32", &p), 3);
	assert_int_equal(pick_index(g, n, -1, AF_INET, "192.168.7.0/25", &p), 5);
	assert_int_equal(pick_index(g, n, -1, AF_INET, "192.168.7.128/25", &p), -1);
	assert_string_equal(p.why, "no IPv4 RoCE GID in 192.168.7.128/25 (skipped: 0 "
				   "link-local, 1 link-local, 2 range, 3 range, 4 range, 5 range)");
	/* an IPv6 range matches no IPv4 GID */
	assert_int_equal(pick_index(g, n, -1, AF_INET, "fd00::/8", &p), -1);
	assert_false(p.range_bad);
}

static void bad_range_is_ignored(void **state)
{
	static const char *const bad[] = { "192.168.7.1", "192.168.0.0/33", "x/8", "::/129" };
	struct braid_gid_entry g[8];
	struct braid_gid_pick p;
	int n = two_v4(g);

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(pick_index(g, n, -1, AF_INET, bad[i], &p), 3);
		assert_true(p.range_bad);
	}
}

static void roce_version_fallback(void **state)
{
	struct braid_gid_entry g[2] = {
		entry(0, "fe80::a00:27ff:fe00:1", BRAID_GID_ROCE_V1),
		entry(2, "::ffff:10.0.0.1", BRAID_GID_ROCE_V1),
	};
	struct braid_gid_pick p;

	(void)state;
	assert_int_equal(pick_index(g, 2, -1, AF_INET, NULL, &p), 2);
	assert_true(p.version_fallback);
	assert_string_equal(p.why, "no RoCEv2 GID fits; RoCEv1 fallback");
	/* the fallback keeps to the range too */
	assert_int_equal(pick_index(g, 2, -1, AF_INET, "192.168.0.0/16", &p), -1);
	assert_false(p.version_fallback);
}

/* NCCL_IB_ROCE_VERSION_NUM=1: RoCEv1 first, RoCEv2 only as the fallback. */
static void prefer_roce_v1(void **state)
{
	struct braid_gid_entry g[8];
	struct braid_gid_rule r = { .want_index = -1, .family = AF_INET, .roce_version = 1 };
	struct braid_gid_pick p;
	int n = two_v4(g);

	(void)state;
	braid_gid_choose(g, n, &r, &p);
	assert_int_equal(g[p.pos].index, 2);
	assert_false(p.version_fallback);
	assert_string_equal(p.why, "first RoCEv1 IPv4 GID (skipped 0 link-local, 1 link-local)");
	g[0] = g[3]; /* a port with RoCEv2 GIDs only */
	g[1] = g[5];
	braid_gid_choose(g, 2, &r, &p);
	assert_int_equal(g[p.pos].index, 3);
	assert_true(p.version_fallback);
	assert_string_equal(p.why, "no RoCEv1 GID fits; RoCEv2 fallback");
	setenv("NCCL_IB_ROCE_VERSION_NUM", "1", 1);
	braid_params_reset();
	braid_gid_rule_from_params(&r);
	assert_int_equal(r.roce_version, 1);
	unsetenv("NCCL_IB_ROCE_VERSION_NUM");
	braid_params_reset();
	braid_gid_rule_from_params(&r);
	assert_int_equal(r.roce_version, 2);
}

static void untyped_counts_as_v2(void **state)
{
	/* no ibv_query_gid_ex, no sysfs types file: the type cannot disqualify a GID */
	struct braid_gid_entry g[2] = {
		entry(0, "fe80::1", BRAID_GID_UNKNOWN),
		entry(1, "::ffff:10.0.0.1", BRAID_GID_UNKNOWN),
	};
	struct braid_gid_pick p;

	(void)state;
	assert_int_equal(pick_index(g, 2, -1, AF_INET, NULL, &p), 1);
	assert_false(p.version_fallback);
	assert_string_equal(p.why, "first (type unknown) IPv4 GID (skipped 0 link-local)");
}

static void ipv6_family(void **state)
{
	struct braid_gid_entry g[8];
	struct braid_gid_pick p;
	int n = two_v4(g);

	(void)state;
	assert_int_equal(pick_index(g, n, -1, AF_INET6, NULL, &p), -1); /* link-local only */
	g[n++] = entry(6, "fd00::7", BRAID_GID_ROCE_V1);
	g[n++] = entry(7, "fd00::7", BRAID_GID_ROCE_V2);
	assert_int_equal(pick_index(g, n, -1, AF_INET6, NULL, &p), 7);
	assert_int_equal(pick_index(g, n, -1, AF_INET6, "fd00::/64", &p), 7);
	assert_int_equal(pick_index(g, n, -1, AF_INET6, "fd01::/16", &p), -1);
}

static void index_as_set(void **state)
{
	struct braid_gid_entry g[8];
	struct braid_gid_pick p;
	int n = two_v4(g);

	(void)state;
	/* the index wins over every rule, RoCE v1 and link-local included */
	assert_int_equal(pick_index(g, n, 0, AF_INET, "192.168.0.0/16", &p), 0);
	assert_int_equal(pick_index(g, n, 4, AF_INET6, NULL, &p), 4);
	assert_int_equal(pick_index(g, n, 9, AF_INET, NULL, &p), -1);
	assert_string_equal(p.why, "no GID at index 9");
}

static void rule_from_params_and_aliases(void **state)
{
	struct braid_gid_rule r;

	(void)state;
	unsetenv("BRAID_IB_GID_INDEX");
	unsetenv("BRAID_IB_ADDR_FAMILY");
	unsetenv("BRAID_IB_ADDR_RANGE");
	setenv("NCCL_IB_GID_INDEX", "3", 1);
	setenv("NCCL_IB_ADDR_FAMILY", "AF_INET6", 1);
	setenv("NCCL_IB_ADDR_RANGE", "fd00::/8", 1);
	braid_params_reset();
	braid_gid_rule_from_params(&r);
	assert_int_equal(r.want_index, 3);
	assert_int_equal(r.family, AF_INET6);
	assert_string_equal(r.range, "fd00::/8");
	setenv("BRAID_IB_GID_INDEX", "-1", 1); /* BRAID_* before NCCL_* */
	setenv("BRAID_IB_ADDR_FAMILY", "AF_INET", 1);
	setenv("BRAID_IB_ADDR_RANGE", "10.0.0.0/8", 1);
	braid_params_reset();
	braid_gid_rule_from_params(&r);
	assert_int_equal(r.want_index, -1);
	assert_int_equal(r.family, AF_INET);
	assert_string_equal(r.range, "10.0.0.0/8");
	unsetenv("NCCL_IB_GID_INDEX");
	unsetenv("NCCL_IB_ADDR_FAMILY");
	unsetenv("NCCL_IB_ADDR_RANGE");
	unsetenv("BRAID_IB_GID_INDEX");
	unsetenv("BRAID_IB_ADDR_FAMILY");
	unsetenv("BRAID_IB_ADDR_RANGE");
	braid_params_reset();
}

static void touch(const char *root, const char *file)
{
	char path[512], cmd[1200];

	snprintf(path, sizeof(path), "%s%s", root, file);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && touch '%s'", path, path);
	assert_int_equal(system(cmd), 0);
}

static void peermem_files_under_a_root(void **state)
{
	char dir[] = "/tmp/braid-peermem.XXXXXX", slash[64], cmd[128];

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_null(braid_peermem_file(dir));
	/* a module directory without its version file does not count */
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/sys/module/nvidia_peermem", dir);
	assert_int_equal(system(cmd), 0);
	assert_null(braid_peermem_file(dir));
	touch(dir, "/sys/module/nvidia_peermem/version");
	assert_string_equal(braid_peermem_file(dir), "/sys/module/nvidia_peermem/version");
	touch(dir, "/sys/kernel/mm/memory_peers/nv_mem_nc/version");
	assert_string_equal(braid_peermem_file(dir),
			    "/sys/kernel/mm/memory_peers/nv_mem_nc/version"); /* NCCL's order */
	snprintf(slash, sizeof(slash), "%s/", dir); /* a trailing slash does not double */
	assert_string_equal(braid_peermem_file(slash),
			    "/sys/kernel/mm/memory_peers/nv_mem_nc/version");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_ipv4_roce_v2),
		cmocka_unit_test(addr_range_narrows),
		cmocka_unit_test(bad_range_is_ignored),
		cmocka_unit_test(roce_version_fallback),
		cmocka_unit_test(prefer_roce_v1),
		cmocka_unit_test(untyped_counts_as_v2),
		cmocka_unit_test(ipv6_family),
		cmocka_unit_test(index_as_set),
		cmocka_unit_test(rule_from_params_and_aliases),
		cmocka_unit_test(peermem_files_under_a_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
