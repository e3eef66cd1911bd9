/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA driver, opened at run time like libfabric and libibverbs (the plugin must load
 * where there is none). Only what a backend needs to describe a buffer to its provider:
 * the device a pointer belongs to (net_ofi: fi_mr_attr.device.cuda for FI_HMEM_CUDA).
 */
#ifndef BRAID_CUDA_DL_H
#define BRAID_CUDA_DL_H

/* 1 when libcuda.so.1 loads and has cuPointerGetAttribute; tried once. */
int braid_cuda_available(void);

/* The CUDA device ordinal of device memory at p: 0, or -1 when p is not device memory the
 * driver knows (or there is no driver), with why (a CUresult or "no driver") in why. */
int braid_cuda_ptr_device(const void *p, int *ordinal, char *why, int why_len);

/* NCCL's own check before it uses dma-buf (init.cc, dmaBufSupported): a driver 11.7+
 * (version: cuDriverGetVersion, 0 unknown) whose GPUs say CU_DEVICE_ATTRIBUTE_DMA_BUF_
 * SUPPORTED; NCCL asks about its own GPU, braid about all of them. 1 yes, 0 no, -1 cannot
 * tell (no driver, not initialised, no GPU). */
int braid_cuda_dmabuf(int *version);

#endif
