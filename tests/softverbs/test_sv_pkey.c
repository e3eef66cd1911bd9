// SPDX-License-Identifier: MIT
/*
 * Partitions (sv_pkey.c, IBA 10.9.3): a QP reaches another only when their P_Keys share
 * the 15-bit partition and one of them is a full member; otherwise its packets are
 * dropped and its send ends in IBV_WC_RETRY_EXC_ERR, as on a partitioned fabric. The
 * P_Key table and ibv_query_pkey / ibv_get_pkey_index follow SOFTVERBS_PKEYS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/softverbs/sv_test_util.h"

/* Index: 0 default full, 1 full 0x0001, 2 full 0x0002, 3 limited 0x0001, 4 limited 0x0002 */
#define PKEYS "svib0:0xffff/0x8001/0x8002/0x0001/0x0002"

/* One WRITE from a (pkey index ia) to b (index ib): the completion status. */
static int write_status(uint16_t ia, uint16_t ib)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	static char src[4096], dst[4096];
	struct svt_end a, b;
	struct svt_addr aa, ba;
	struct ibv_mr *amr, *bmr;
	struct ibv_wc wc;
	int status;

	assert_int_equal(svt_end_init(&a, "svib0", false, 16), 0);
	assert_int_equal(svt_end_init(&b, "svib0", false, 16), 0);
	svt_addr_of(&a, -1, &aa);
	svt_addr_of(&b, -1, &ba);
	svt_pkey_index = ia;
	assert_int_equal(svt_connect(&a, &ba, -1, acc, 8, 2, 7), 0);
	svt_pkey_index = ib;
	assert_int_equal(svt_connect(&b, &aa, -1, acc, 8, 2, 7), 0);
	svt_pkey_index = 0;
	amr = ibv_reg_mr(a.pd, src, sizeof(src), acc);
	bmr = ibv_reg_mr(b.pd, dst, sizeof(dst), acc);
	assert_non_null(amr);
	assert_non_null(bmr);
	memset(src, 0x5a, sizeof(src));
	memset(dst, 0, sizeof(dst));
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, sizeof(src), amr->lkey,
				       (uintptr_t)dst, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, 10000), 0);
	status = wc.status;
	if (status == IBV_WC_SUCCESS)
		assert_memory_equal(src, dst, sizeof(src));
	else
		for (size_t i = 0; i < sizeof(dst); i++)
			assert_int_equal(dst[i], 0); /* nothing crossed the partition */
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
	return status;
}

static void table_follows_the_knob(void **state)
{
	struct ibv_context *ctx = svt_open("svib0");
	struct ibv_port_attr pa;
	__be16 k;

	(void)state;
	assert_non_null(ctx);
	assert_int_equal(ibv_query_port(ctx, 1, &pa), 0);
	assert_int_equal(pa.pkey_tbl_len, 16);
	assert_int_equal(ibv_query_pkey(ctx, 1, 1, &k), 0);
	assert_int_equal(be16toh(k), 0x8001);
	assert_int_equal(ibv_query_pkey(ctx, 1, 5, &k), 0);
	assert_int_equal(be16toh(k), 0); /* empty entry */
	assert_int_not_equal(ibv_query_pkey(ctx, 1, 16, &k), 0);
	assert_int_equal(ibv_get_pkey_index(ctx, 1, htobe16(0x0002)), 4);
	assert_true(ibv_get_pkey_index(ctx, 1, htobe16(0x8003)) < 0);
	ibv_close_device(ctx);
}

static void same_partition_full_members(void **state)
{
	(void)state;
	assert_int_equal(write_status(1, 1), IBV_WC_SUCCESS);
	assert_int_equal(write_status(0, 0), IBV_WC_SUCCESS);
}

static void full_and_limited_member(void **state)
{
	(void)state;
	assert_int_equal(write_status(1, 3), IBV_WC_SUCCESS);
	assert_int_equal(write_status(3, 1), IBV_WC_SUCCESS);
}

static void different_partitions_cannot_reach(void **state)
{
	(void)state;
	assert_int_equal(write_status(1, 2), IBV_WC_RETRY_EXC_ERR);
	assert_int_equal(write_status(0, 1), IBV_WC_RETRY_EXC_ERR);
}

static void two_limited_members_cannot_reach(void **state)
{
	(void)state;
	assert_int_equal(write_status(3, 3), IBV_WC_RETRY_EXC_ERR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table_follows_the_knob),
		cmocka_unit_test(same_partition_full_members),
		cmocka_unit_test(full_and_limited_member),
		cmocka_unit_test(different_partitions_cannot_reach),
		cmocka_unit_test(two_limited_members_cannot_reach),
	};

	setenv("SOFTVERBS_DEVICES", "svib0:ib:1", 1);
	setenv("SOFTVERBS_PKEYS", PKEYS, 1);
	return cmocka_run_group_tests(tests, svt_fabric_group_setup, svt_fabric_group_teardown);
}
