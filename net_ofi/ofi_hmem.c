// SPDX-License-Identifier: Apache-2.0
#include "net_ofi/ofi_hmem.h"

#include <string.h>

#include "nccl_net_abi.h"
#include "plugin/params.h"

uint64_t ofi_hmem_mr_mode_offered(void)
{
	return FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT |
	       FI_MR_HMEM;
}

int ofi_hmem_ptr_support(uint64_t hmem_caps, int cuda_driver)
{
	int bits = NCCL_PTR_HOST;

	if ((hmem_caps & FI_HMEM) && cuda_driver)
		bits |= NCCL_PTR_CUDA;
	return bits;
}

int ofi_hmem_needs_registration(uint64_t mr_mode, int type)
{
	if (type == NCCL_PTR_CUDA)
		return !!(mr_mode & (FI_MR_LOCAL | FI_MR_HMEM));
	return !!(mr_mode & FI_MR_LOCAL);
}

void ofi_hmem_mr_attr(struct fi_mr_attr *attr, struct iovec *iov, void *buf, size_t len,
		      uint64_t access, uint64_t requested_key, int type, int cuda_device)
{
	memset(attr, 0, sizeof(*attr));
	iov->iov_base = buf;
	iov->iov_len = len;
	attr->mr_iov = iov;
	attr->iov_count = 1;
	attr->access = access;
	attr->requested_key = requested_key;
	if (type == NCCL_PTR_CUDA) {
		attr->iface = FI_HMEM_CUDA;
		attr->device.cuda = cuda_device;
	} else {
		attr->iface = FI_HMEM_SYSTEM;
	}
}

int ofi_hmem_forbid_cuda_api(uint64_t hmem_caps)
{
#if FI_VERSION_GE(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 18))
	return !!(hmem_caps & FI_HMEM); /* FI_OPT_CUDA_API_PERMITTED, an enum: no #ifdef */
#else
	(void)hmem_caps;
	return 0; /* libfabric < 1.18: no such option */
#endif
}

int ofi_hmem_self_read_on_nic(const char *prov, int shm_off, int cuda_api_off,
			      const char *efa_shm_env)
{
	static const struct braid_param_desc efa_shm = { .name = "FI_EFA_ENABLE_SHM_TRANSFER",
							 .type = BRAID_PARAM_BOOL };
	int64_t on = 1;

	if (strcmp(prov, "efa") || shm_off || cuda_api_off)
		return 1;
	return efa_shm_env && !braid_param_parse(&efa_shm, efa_shm_env, &on) && !on;
}
