/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's struct layouts next to ours: one entry per v8..v12 line of
 * tests/unit/nccl-net-abi-v8-v12.txt, generated from it by gen-abi-facts.awk into
 * abi_facts.c, which evaluates each against include/nccl_net_abi.h. test_abi compares them;
 * test-abi-mutation.sh rebuilds abi_facts.c against mutated copies of the header.
 */
#ifndef BRAID_TEST_ABI_CHECK_H
#define BRAID_TEST_ABI_CHECK_H

#include <stddef.h>

struct abi_fact {
	const char *type;
	const char *member;          /* NULL: the line gives sizeof(type) */
	int line;                    /* in abi_facts_file */
	size_t offset, size;         /* NCCL's, from the file */
	size_t our_offset, our_size; /* include/nccl_net_abi.h's */
};

/* A struct or member missing from our header is a compile error at its fact line. */
#define ABI_SIZEOF(type, sz) { #type, NULL, __LINE__, 0, sz, 0, sizeof(type) },
#define ABI_MEMBER(type, m, off, sz) \
	{ #type, #m, __LINE__, off, sz, offsetof(type, m), sizeof(((type *)0)->m) },

extern const struct abi_fact abi_facts[];
extern const size_t abi_nfacts;
extern const char abi_facts_file[];
extern const int abi_facts_skipped; /* lines of versions braid does not define */
extern const char abi_facts_skipped_versions[];

#endif
