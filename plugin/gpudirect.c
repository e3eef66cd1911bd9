// SPDX-License-Identifier: Apache-2.0
#include "plugin/gpudirect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/counters.h"
#include "plugin/cuda_dl.h"
#include "plugin/log.h"

/* An NCCL integer parameter as NCCL reads it (ncclLoadParam): unset, empty or unparsable
 * (out of range) is the default; otherwise strtoll(value, 0). */
static long long nccl_param(const char *name, long long dflt)
{
	const char *v = getenv(name);
	long long n;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoll(v, NULL, 0);
	return errno ? dflt : n;
}

int braid_gdr_nccl_dmabuf(void)
{
	int version;

	/* NCCL's own variable, read here only to predict what NCCL does (not a braid knob,
	 * hence not in plugin/params.h). */
	if (nccl_param("NCCL_DMABUF_ENABLE", 1) == 0)
		return 0;
	return braid_cuda_dmabuf(&version) == 0 ? BRAID_GDR_DMABUF_NO_DRIVER : 1;
}

int braid_gdr_nccl_flush_disabled(void)
{
	/* NCCL's IB transport's own variable (ncclParamIbGdrFlushDisable), honoured as it is. */
	return nccl_param("NCCL_GDR_FLUSH_DISABLE", 0) != 0;
}

/* Why GPUDirect RDMA is off, and what turns it on. */
static void say(struct braid_gdr_out *out, const char *why, const char *fix)
{
	snprintf(out->why, sizeof(out->why), "%s", why);
	snprintf(out->fix, sizeof(out->fix), "%s", fix);
}

static void off_ib(const struct braid_gdr_in *in, struct braid_gdr_out *out)
{
	if ((in->ptr_support & NCCL_PTR_DMABUF) && in->nccl_dmabuf == BRAID_GDR_DMABUF_NO_DRIVER) {
		say(out,
		    "the NIC registers dma-bufs but the CUDA driver does not (NCCL needs driver "
		    "11.7+ and CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED), and there is no peer "
		    "memory (nvidia_peermem not loaded)",
		    "use an NVIDIA driver with dma-buf support (the open kernel modules), or "
		    "load nvidia_peermem");
		return;
	}
	if (in->ptr_support & NCCL_PTR_DMABUF) {
		say(out,
		    "dma-buf works but NCCL_DMABUF_ENABLE=0 turns NCCL's use of it off, and "
		    "there is no peer memory (nvidia_peermem not loaded)",
		    "unset NCCL_DMABUF_ENABLE (or set it to 1), or load nvidia_peermem");
		return;
	}
	say(out,
	    "no peer memory (nvidia_peermem not loaded) and no dma-buf (ibv_reg_dmabuf_mr "
	    "not supported by the kernel or the verbs provider)",
	    "load nvidia_peermem (modprobe nvidia_peermem), or use a kernel, rdma-core and "
	    "NIC driver with dma-buf support (Linux 5.12+, rdma-core 34+)");
}

void braid_gdr_decide(const struct braid_gdr_in *in, struct braid_gdr_out *out)
{
	int cuda = in->ptr_support & NCCL_PTR_CUDA, dmabuf = in->ptr_support & NCCL_PTR_DMABUF;

	memset(out, 0, sizeof(*out));
	if (dmabuf && in->nccl_dmabuf > 0) {
		out->on = 1;
		out->mode = "dma-buf";
		snprintf(out->why, sizeof(out->why),
			 "dma-buf: the NIC registers dma-bufs and NCCL uses them (NCCL_DMABUF_ENABLE "
			 "on; the CUDA driver must support dma-buf too): CUDA buffers come through "
			 "regMrDmaBuf%s",
			 cuda ? " (peer memory is there too)" : "");
	} else if (cuda && in->backend == BRAID_BACKEND_OFI) {
		out->on = 1;
		out->mode = "fi_hmem";
		snprintf(out->why, sizeof(out->why),
			 "FI_HMEM: the provider registers CUDA buffers (fi_mr_regattr with "
			 "FI_HMEM_CUDA and the buffer's device)");
	} else if (cuda) {
		out->on = 1;
		out->mode = "peermem";
		snprintf(out->why, sizeof(out->why),
			 "peer memory (nvidia_peermem): CUDA buffers registered with regMr%s",
			 !dmabuf ? ""
			 : in->nccl_dmabuf == BRAID_GDR_DMABUF_NO_DRIVER
				 ? "; the NIC does dma-buf, the "
				   "CUDA driver does not"
				 : "; dma-buf also works, but NCCL_DMABUF_ENABLE=0");
	} else {
		out->mode = "none";
		if (in->backend == BRAID_BACKEND_OFI) {
			say(out,
			    "no FI_HMEM: the provider does not report it for this domain, this "
			    "libfabric registers no CUDA memory, or there is no CUDA driver "
			    "(libcuda.so.1)",
			    "use a provider built with CUDA support that reports FI_HMEM (EFA), "
			    "or on verbs NICs the ib backend (BRAID_BACKEND=ib)");
		} else {
			off_ib(in, out);
		}
		out->warn = in->ngpus > 0;
	}
}

/* Any thread registers (NCCL's proxy threads, one per GPU): counted atomically. */
static unsigned recv_regs_gpu, recv_regs_host;
static int recv_regs_warned;

/* braid stat's copy (counters layout 7): whether GPUDirect is used, not only offered */
static void note_in_counters(int gpu)
{
	struct braid_ctr_region *r = braid_counters();

	if (r)
		__atomic_add_fetch(gpu ? &r->fallback.recv_regs_gpu : &r->fallback.recv_regs_host,
				   1, __ATOMIC_RELAXED);
}

void braid_gdr_note_reg(int recv, int gpu, int gpudirect)
{
	unsigned host;

	if (!recv)
		return;
	note_in_counters(gpu);
	if (gpu) {
		__atomic_add_fetch(&recv_regs_gpu, 1, __ATOMIC_RELAXED);
		return;
	}
	host = __atomic_add_fetch(&recv_regs_host, 1, __ATOMIC_RELAXED);
	if (host < 3 || !gpudirect || __atomic_load_n(&recv_regs_gpu, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&recv_regs_warned, 1, __ATOMIC_RELAXED))
		return;
	BRAID_WARN("NCCL receives into host memory: %u buffers of its receive comms registered, "
		   "none of GPU memory, although braid offers GPUDirect RDMA on every device. "
		   "NCCL copies each message from host memory to the GPU. It decides per GPU and "
		   "NIC (its INFO line \"GPU Direct RDMA Disabled for GPU g / HCA n (distance d > "
		   "l)\"): NCCL_NET_GDR_LEVEL raises the distance it accepts (e.g. SYS), where "
		   "the PCIe path between them is fit for it.",
		   host);
}
