// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi's iflush (net_ofi/ofi_mr.c). NCCL asks for a flush only after a receive the NIC
 * wrote into GPU memory (ncclTopoNeedFlush: GPUs under compute capability 9.0, or a
 * DataDirect NIC), and net_ofi has no flush READ yet while its ptrSupport offers CUDA on
 * an FI_HMEM provider. So it must say so, once, naming the peer and the way out
 * (NCCL_NET_GDR_LEVEL=LOC), and still answer with no request, as before; host memory, a
 * handle that is not a registration and an empty flush say nothing.
 */
#include <string.h>

#include "tests/unit/ofi_fake.h"

static int flush(struct ofi_comm *c, struct ofi_mr *m, int size)
{
	void *data = (void *)0x1000, *mh = m, *req = (void *)1;
	int sizes[1] = { size };

	assert_int_equal(ofi_iflush(c, 1, &data, sizes, &mh, &req), ncclSuccess);
	assert_null(req);
	return strstr(unit_log, "net_ofi has no GPUDirect flush") != NULL;
}

static void a_flush_into_gpu_memory_is_told_once(void **state)
{
	struct ofi_comm *c = fake_comm(1, "fake0", NULL);
	struct ofi_mr host = { .magic = BRAID_MAGIC_MR, .range = { .type = NCCL_PTR_HOST } };
	struct ofi_mr gpu = { .magic = BRAID_MAGIC_MR, .range = { .type = NCCL_PTR_CUDA } };
	struct ofi_mr stale = { .magic = 0, .range = { .type = NCCL_PTR_CUDA } };
	void *req = (void *)1;

	(void)state;
	set_env("2000", "100");
	assert_false(flush(c, &host, 4096));
	assert_int_equal(ofi_iflush(c, 0, NULL, NULL, NULL, &req), ncclSuccess); /* none */
	assert_null(req);
	assert_false(flush(c, &stale, 4096)); /* not a registration of ours */
	assert_true(flush(c, &gpu, 4096));
	assert_non_null(strstr(unit_log, "198.18.1.1:4000"));
	assert_non_null(strstr(unit_log, "NCCL_NET_GDR_LEVEL=LOC"));
	unit_log_reset();
	assert_false(flush(c, &gpu, 4096)); /* once a process */
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_flush_into_gpu_memory_is_told_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
