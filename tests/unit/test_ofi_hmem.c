// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi/ofi_hmem.h: the FI_HMEM decisions, each against what libfabric documents
 * (fi_mr(3), fi_getinfo(3), fi_endpoint(3)) and what EFA asks for:
 *   - ptrSupport CUDA only where the provider reports FI_HMEM and a CUDA driver can name a
 *     buffer's device; never DMABUF on libfabric < 1.20 (no FI_MR_DMABUF);
 *   - the mr_mode bits offered include every bit EFA requires (LOCAL, VIRT_ADDR, ALLOCATED,
 *     PROV_KEY, HMEM), so the provider can keep them;
 *   - a device buffer needs a registration under FI_MR_HMEM even without FI_MR_LOCAL;
 *   - the fi_mr_attr of a CUDA buffer names FI_HMEM_CUDA and its device, of a host buffer
 *     FI_HMEM_SYSTEM;
 *   - FI_OPT_CUDA_API_PERMITTED is set only where it exists (1.18+) and FI_HMEM is used.
 */
#include <string.h>

#include "nccl_net_abi.h"
#include "net_ofi/ofi_hmem.h"
#include "tests/unit/unit.h"

static void ptr_support(void **state)
{
	(void)state;
	assert_int_equal(ofi_hmem_ptr_support(0, 0), NCCL_PTR_HOST);
	assert_int_equal(ofi_hmem_ptr_support(0, 1), NCCL_PTR_HOST);
	assert_int_equal(ofi_hmem_ptr_support(FI_HMEM | FI_TAGGED, 0), NCCL_PTR_HOST);
	assert_int_equal(ofi_hmem_ptr_support(FI_TAGGED | FI_SEND | FI_RECV, 1), NCCL_PTR_HOST);
	assert_int_equal(ofi_hmem_ptr_support(FI_HMEM | FI_TAGGED, 1),
			 NCCL_PTR_HOST | NCCL_PTR_CUDA);
	/* libfabric 1.17 has no FI_MR_DMABUF: never DMABUF */
	assert_int_equal(ofi_hmem_ptr_support(FI_HMEM, 1) & NCCL_PTR_DMABUF, 0);
}

static void mr_mode_offered_has_what_efa_needs(void **state)
{
	const uint64_t efa = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
			     FI_MR_HMEM;

	(void)state;
	assert_int_equal(ofi_hmem_mr_mode_offered() & efa, efa);
	/* FI_MR_BASIC/SCALABLE are the old exclusive modes: never offered with the bits */
	assert_int_equal(ofi_hmem_mr_mode_offered() & (FI_MR_BASIC | FI_MR_SCALABLE), 0);
}

static void needs_registration(void **state)
{
	(void)state;
	assert_false(ofi_hmem_needs_registration(0, NCCL_PTR_HOST));
	assert_false(ofi_hmem_needs_registration(0, NCCL_PTR_CUDA));
	assert_true(ofi_hmem_needs_registration(FI_MR_LOCAL, NCCL_PTR_HOST));
	assert_true(ofi_hmem_needs_registration(FI_MR_LOCAL, NCCL_PTR_CUDA));
	/* FI_MR_HMEM: device buffers always, host buffers only under FI_MR_LOCAL */
	assert_true(ofi_hmem_needs_registration(FI_MR_HMEM, NCCL_PTR_CUDA));
	assert_false(ofi_hmem_needs_registration(FI_MR_HMEM, NCCL_PTR_HOST));
	assert_false(ofi_hmem_needs_registration(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY, NCCL_PTR_CUDA));
}

static void mr_attr(void **state)
{
	static char buf[64];
	struct fi_mr_attr a;
	struct iovec iov;

	(void)state;
	memset(&a, 0xff, sizeof(a));
	ofi_hmem_mr_attr(&a, &iov, buf, sizeof(buf), FI_SEND | FI_RECV, 42, NCCL_PTR_CUDA, 3);
	assert_int_equal(a.iface, FI_HMEM_CUDA);
	assert_int_equal(a.device.cuda, 3);
	assert_ptr_equal(a.mr_iov, &iov);
	assert_int_equal(a.iov_count, 1);
	assert_ptr_equal(iov.iov_base, buf);
	assert_int_equal(iov.iov_len, sizeof(buf));
	assert_int_equal(a.access, FI_SEND | FI_RECV);
	assert_int_equal(a.requested_key, 42);
	assert_int_equal(a.offset, 0);
	assert_null(a.context);
	assert_int_equal(a.auth_key_size, 0);

	ofi_hmem_mr_attr(&a, &iov, buf, 8, FI_RECV, 0, NCCL_PTR_HOST, 3);
	assert_int_equal(a.iface, FI_HMEM_SYSTEM);
	assert_int_equal(a.device.reserved, 0);
	assert_int_equal(iov.iov_len, 8);
}

static void cuda_api_permitted(void **state)
{
	int have = FI_VERSION_GE(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 18));

	(void)state;
	assert_false(ofi_hmem_forbid_cuda_api(0));
	assert_false(ofi_hmem_forbid_cuda_api(FI_TAGGED));
	assert_int_equal(ofi_hmem_forbid_cuda_api(FI_HMEM | FI_TAGGED), have);
}

/* EFA reads its own memory through its shm provider unless something turned that off:
 * then a flush would order nothing on the NIC (aws-ofi-nccl turns shm off for its flush). */
static void a_self_read_goes_through_the_nic_only_where_shm_is_off(void **state)
{
	(void)state;
	assert_false(ofi_hmem_self_read_on_nic("efa", 0, 0, NULL));
	assert_false(ofi_hmem_self_read_on_nic("efa", 0, 0, "1"));
	assert_false(ofi_hmem_self_read_on_nic("efa", 0, 0, "garbage")); /* not read as off */
	assert_true(ofi_hmem_self_read_on_nic("efa", 0, 0, "0"));
	assert_true(ofi_hmem_self_read_on_nic("efa", 0, 0, "false"));
	assert_true(ofi_hmem_self_read_on_nic("efa", 1, 0, NULL)); /* SHARED_MEMORY_PERMITTED */
	assert_true(ofi_hmem_self_read_on_nic("efa", 0, 1, NULL)); /* CUDA_API_PERMITTED */
	assert_true(ofi_hmem_self_read_on_nic("efa-direct", 0, 0, NULL));
	assert_true(ofi_hmem_self_read_on_nic("verbs;ofi_rxm", 0, 0, NULL));
	assert_true(ofi_hmem_self_read_on_nic("tcp;ofi_rxm", 0, 0, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_self_read_goes_through_the_nic_only_where_shm_is_off),
		cmocka_unit_test(ptr_support),
		cmocka_unit_test(mr_mode_offered_has_what_efa_needs),
		cmocka_unit_test(needs_registration),
		cmocka_unit_test(mr_attr),
		cmocka_unit_test(cuda_api_permitted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
