// SPDX-License-Identifier: Apache-2.0
/*
 * Our ABI header against the layouts NCCL 2.28 expects (from its net_v8..v11 headers):
 * a moved field here is a plugin that NCCL reads garbage from.
 */
#include <stddef.h>

#include "tests/unit/unit.h"

#define PTR 8 /* every member of the function tables is a pointer */

static void properties_layout(void **state)
{
	(void)state;
	assert_int_equal(offsetof(ncclNetProperties_v8_t, guid), 16);
	assert_int_equal(offsetof(ncclNetProperties_v8_t, regIsGlobal), 28);
	assert_int_equal(offsetof(ncclNetProperties_v8_t, speed), 32);
	assert_int_equal(offsetof(ncclNetProperties_v8_t, latency), 40);
	assert_int_equal(offsetof(ncclNetProperties_v8_t, maxRecvs), 48);
	assert_int_equal(offsetof(ncclNetProperties_v8_t, netDeviceVersion), 56);
	assert_int_equal(sizeof(ncclNetProperties_v8_t), 64);

	assert_int_equal(offsetof(ncclNetProperties_v9_t, forceFlush), 32);
	assert_int_equal(offsetof(ncclNetProperties_v9_t, speed), 36);
	assert_int_equal(offsetof(ncclNetProperties_v9_t, maxRecvs), 52);
	assert_int_equal(offsetof(ncclNetProperties_v9_t, vProps), 64);
	assert_int_equal(offsetof(ncclNetProperties_v9_t, maxP2pBytes), 88);
	assert_int_equal(offsetof(ncclNetProperties_v9_t, maxCollBytes), 96);
	assert_int_equal(sizeof(ncclNetProperties_v9_t), 104);
	assert_int_equal(sizeof(ncclNetProperties_v10_t), 104);

	assert_int_equal(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize), 104);
	assert_int_equal(sizeof(ncclNetProperties_v11_t), 112);
	assert_int_equal(sizeof(ncclNetVDeviceProps_t), 20);
	assert_int_equal(sizeof(ncclNetAttr_v11_t), 44);
}

static void function_tables(void **state)
{
	(void)state;
	assert_int_equal(offsetof(ncclNet_v8_t, init), 1 * PTR);
	assert_int_equal(offsetof(ncclNet_v8_t, regMr), 7 * PTR);
	assert_int_equal(offsetof(ncclNet_v8_t, isend), 10 * PTR);
	assert_int_equal(offsetof(ncclNet_v8_t, test), 13 * PTR);
	assert_int_equal(offsetof(ncclNet_v8_t, irecvConsumed), 18 * PTR);
	assert_int_equal(sizeof(ncclNet_v8_t), 19 * PTR);
	assert_int_equal(offsetof(ncclNet_v9_t, makeVDevice), 19 * PTR);
	assert_int_equal(sizeof(ncclNet_v9_t), 20 * PTR);
	assert_int_equal(offsetof(ncclNet_v10_t, isend), 10 * PTR);
	assert_int_equal(sizeof(ncclNet_v10_t), 20 * PTR);
	assert_int_equal(offsetof(ncclNet_v11_t, makeVDevice), 19 * PTR);
	assert_int_equal(offsetof(ncclNet_v11_t, finalize), 20 * PTR);
	assert_int_equal(offsetof(ncclNet_v11_t, setNetAttr), 21 * PTR);
	assert_int_equal(sizeof(ncclNet_v11_t), 22 * PTR);
	assert_int_equal(NCCL_NET_HANDLE_MAXSIZE, 128);
	assert_int_equal(NCCL_NET_MAX_REQUESTS, 32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(properties_layout),
		cmocka_unit_test(function_tables),
	};

	return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
