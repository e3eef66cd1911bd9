// SPDX-License-Identifier: Apache-2.0
/*
 * Our ABI header against the layouts NCCL expects: every sizeof, member offset and member
 * size of the v8..v12 lines of tests/unit/nccl-net-abi-v8-v12.txt (measured from NCCL's
 * own headers; abi_facts.c is generated from it). A moved or resized member here is a
 * plugin that NCCL reads garbage from: test-abi-mutation.sh shows that each one is caught.
 */
#include <stdio.h>

#include "tests/unit/abi_check.h"
#include "tests/unit/unit.h"

/* One difference, named by the fact file's line: "FILE:LINE: TYPE.MEMBER: offset 36 in ..." */
static int differs(const struct abi_fact *f, const char *what, size_t ours, size_t nccl)
{
	if (ours == nccl)
		return 0;
	printf("%s:%d: %s%s%s: %s %zu in include/nccl_net_abi.h, NCCL's is %zu\n", abi_facts_file,
	       f->line, f->type, f->member ? "." : "", f->member ? f->member : "", what, ours,
	       nccl);
	return 1;
}

static void layouts_match_nccl(void **state)
{
	int structs = 0, members = 0, wrong = 0;

	(void)state;
	for (size_t i = 0; i < abi_nfacts; i++) {
		const struct abi_fact *f = &abi_facts[i];

		if (!f->member) {
			structs++;
			wrong += differs(f, "sizeof", f->our_size, f->size);
		} else {
			members++;
			wrong += differs(f, "offset", f->our_offset, f->offset);
			wrong += differs(f, "size", f->our_size, f->size);
		}
	}
	printf("abi: checked %d lines of %s (%d struct sizes, %d members: offset and size), "
	       "skipped %d %s lines (braid defines v8..v12 only): %d wrong\n",
	       structs + members, abi_facts_file, structs, members, abi_facts_skipped,
	       abi_facts_skipped_versions, wrong);
	fflush(stdout);
	assert_true(structs > 0 && members > 0);
	assert_int_equal(wrong, 0);
}

static void constants(void **state)
{
	(void)state;
	assert_int_equal(NCCL_NET_HANDLE_MAXSIZE, 128);
	assert_int_equal(NCCL_NET_MAX_REQUESTS, 32);
	/* NCCL 2.30: NCCL_NET_MAX_DEVS_PER_NIC_V11 4, _V12 8; NCCL_NET_ID_UNDEF -1 */
	assert_int_equal(NCCL_NET_MAX_DEVS_PER_NIC, 4);
	assert_int_equal(NCCL_NET_MAX_DEVS_PER_NIC_V12, 8);
	assert_int_equal(NCCL_NET_ID_UNDEF, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layouts_match_nccl),
		cmocka_unit_test(constants),
	};

	return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
