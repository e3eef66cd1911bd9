/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Will NCCL use GPUDirect RDMA with a braid device, and if not, why and what to do.
 *
 * NCCL's rule (src/graph/topo.cc, src/transport/net.cc): GPUDirect when the device's
 * ptrSupport has NCCL_PTR_CUDA (registered with regMr), or has NCCL_PTR_DMABUF and NCCL
 * uses dma-buf itself (NCCL_DMABUF_ENABLE, default on, and a CUDA driver with dma-buf
 * support, asked where one is loaded); CUDA buffers then go through regMrDmaBuf. Backends set
 * the bits exactly where the registration works (net_ib: CUDA with peer memory, DMABUF
 * where ibv_reg_dmabuf_mr works; net_ofi: CUDA where the provider reports FI_HMEM and a
 * CUDA driver is loaded), so the bits are all this needs.
 */
#ifndef BRAID_GPUDIRECT_H
#define BRAID_GPUDIRECT_H

#include "plugin/backend.h"

struct braid_gdr_in {
	enum braid_backend_kind backend;
	int ptr_support; /* the device's ptrSupport */
	int nccl_dmabuf; /* NCCL registers with dma-buf itself: braid_gdr_nccl_dmabuf() */
	int ngpus;       /* GPUs in the topology; -1 unknown */
};

struct braid_gdr_out {
	int on;           /* NCCL will use GPUDirect RDMA with this device */
	const char *mode; /* "dma-buf", "peermem", "fi_hmem" (ofi), "none" (gpudirect_mode) */
	int warn;         /* GPUs are present and GPUDirect is off: say so in one WARN */
	char why[256];    /* the reason (braid_ctr_fallback.gpudirect_why) */
	char fix[256];    /* what to do about it; "" when on */
};

void braid_gdr_decide(const struct braid_gdr_in *in, struct braid_gdr_out *out);

/* Whether NCCL uses dma-buf itself (init.cc, dmaBufSupported): 1 yes; 0 no,
 * NCCL_DMABUF_ENABLE=0 (read as NCCL reads it: unset, empty or unparsable is the default,
 * on; otherwise strtoll(value, 0) != 0); BRAID_GDR_DMABUF_NO_DRIVER no, the CUDA driver
 * has no dma-buf support (plugin/cuda_dl.h; where braid cannot tell, 1). */
#define BRAID_GDR_DMABUF_NO_DRIVER (-1)
int braid_gdr_nccl_dmabuf(void);

/* NCCL_GDR_FLUSH_DISABLE as NCCL's IB transport reads it (default 0): non-zero turns its
 * flush READ off (flushEnabled = (peer memory || dma-buf) && !NCCL_GDR_FLUSH_DISABLE). */
int braid_gdr_nccl_flush_disabled(void);

/*
 * Whether NCCL uses the GPUDirect RDMA braid offers. NCCL registers each protocol buffer
 * of a connection (net.cc), a GPU one where it uses GPUDirect RDMA for it: on its receive
 * side LL128's and Simple's. Its choice is per GPU and NIC (NCCL_NET_GDR_LEVEL against
 * their distance), so with every device offering GPUDirect NCCL may still receive into
 * host memory and copy each message to the GPU, saying so only at INFO. A registration
 * on a receive comm (recv: 1) of GPU memory (gpu: 1) or host memory: once three of host
 * memory and none of GPU memory are in while braid offers GPUDirect (gpudirect: the
 * fallback record's), one WARN.
 */
void braid_gdr_note_reg(int recv, int gpu, int gpudirect);

#endif
