/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU memory (FI_HMEM) on the ofi backend, the way EFA needs it, as pure decisions (unit
 * tested in tests/unit/test_ofi_hmem.c); ofi_dev.c and ofi_mr.c act on them.
 */
#ifndef BRAID_OFI_HMEM_H
#define BRAID_OFI_HMEM_H

#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

/* The mr_mode bits braid honours, FI_MR_HMEM included: the hints offer all of them and the
 * provider keeps those it needs (EFA: LOCAL, VIRT_ADDR, ALLOCATED, PROV_KEY, HMEM). */
uint64_t ofi_hmem_mr_mode_offered(void);

/* ptrSupport of a device: HOST, and CUDA only where the provider reports FI_HMEM for its
 * domain (hmem_caps: info->caps of the FI_HMEM getinfo, 0 when none matched) and a CUDA
 * driver is there to name a buffer's device. DMABUF needs FI_MR_DMABUF (libfabric 1.20). */
int ofi_hmem_ptr_support(uint64_t hmem_caps, int cuda_driver);

/* Whether a buffer of this NCCL pointer type needs a registration (a descriptor): host
 * memory under FI_MR_LOCAL; device memory under FI_MR_LOCAL or FI_MR_HMEM. */
int ofi_hmem_needs_registration(uint64_t mr_mode, int type);

/* The fi_mr_regattr attributes of [buf, buf + len): iface FI_HMEM_CUDA and the device for
 * CUDA memory (type NCCL_PTR_CUDA), FI_HMEM_SYSTEM otherwise; requested_key used only
 * without FI_MR_PROV_KEY. iov must outlive the call that uses attr. */
void ofi_hmem_mr_attr(struct fi_mr_attr *attr, struct iovec *iov, void *buf, size_t len,
		      uint64_t access, uint64_t requested_key, int type, int cuda_device);

/* Set FI_OPT_CUDA_API_PERMITTED to false on the endpoint (the provider must not call CUDA
 * from the progress thread: NCCL forbids it)? Only where the option exists (libfabric
 * 1.18+) and the device does FI_HMEM. */
int ofi_hmem_forbid_cuda_api(uint64_t hmem_caps);

/* Whether a read of our own memory through our own endpoint goes through the NIC, as a
 * flush must (net_ofi/ofi_flush.c). EFA carries a peer on the same host, itself included,
 * through its shm provider unless that is off: FI_OPT_SHARED_MEMORY_PERMITTED set false
 * (libfabric 1.21+; shm_off), FI_OPT_CUDA_API_PERMITTED set false on an FI_HMEM endpoint
 * (1.18+, where EFA then drops shm; cuda_api_off), or FI_EFA_ENABLE_SHM_TRANSFER false
 * (efa_shm_env, NULL: unset). efa-direct has no shm path, verbs;ofi_rxm reads through the
 * NIC, and tcp and shm move host memory with the CPU whichever way. */
int ofi_hmem_self_read_on_nic(const char *prov, int shm_off, int cuda_api_off,
			      const char *efa_shm_env);

#endif
