/* SPDX-License-Identifier: Apache-2.0 */
/*
 * braid's version-neutral API: what every ncclNetPlugin_vN adapter calls. init is
 * reference-counted (v11 calls it once per communicator); the last finalize releases
 * what the first init took.
 */
#ifndef BRAID_CORE_H
#define BRAID_CORE_H

#include "plugin/backend.h"

/* api_version: the ncclNet version NCCL loaded (8..12); some defaults follow it. */
ncclResult_t braid_init(ncclDebugLogger_t logger, int api_version);
ncclResult_t braid_finalize(void);
ncclResult_t braid_devices(int *ndev);
/* *props points at braid's copy, alive until the last finalize (NCCL keeps name and pciPath). */
ncclResult_t braid_get_properties(int dev, const struct braid_dev_props **props);
ncclResult_t braid_listen(int dev, void *handle, void **listen_comm);
/* opts->prof: the callback of the comms it accepts (plugin/profiler.h). */
ncclResult_t braid_listen_opts(int dev, const struct braid_conn_opts *opts, void *handle,
			       void **listen_comm);
ncclResult_t braid_connect(int dev, const struct braid_conn_opts *opts, void *handle,
			   void **send_comm, ncclNetDeviceHandle_t **dev_handle);
ncclResult_t braid_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev_handle);
ncclResult_t braid_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t braid_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				 int fd, void **mhandle);
ncclResult_t braid_dereg_mr(void *comm, void *mhandle);
ncclResult_t braid_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			 void **request);
ncclResult_t braid_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
			 void **mhandles, void **request);
/* With NCCL's profiler parents (v10+): phandle, phandles[0..n) (NULL: none). */
ncclResult_t braid_isend_ph(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			    void *phandle, void **request);
ncclResult_t braid_irecv_ph(void *recv_comm, int n, void **data, const size_t *sizes,
			    const int *tags, void **mhandles, void **phandles, void **request);
ncclResult_t braid_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			  void **request);
/* NCCL's test() of every version: when *done, sizes (unless NULL) holds one size per buffer
 * (n of them for a grouped receive). */
ncclResult_t braid_test(void *request, int *done, int *sizes);
ncclResult_t braid_close_send(void *send_comm);
ncclResult_t braid_close_recv(void *recv_comm);
ncclResult_t braid_close_listen(void *listen_comm);
ncclResult_t braid_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle);
ncclResult_t braid_irecv_consumed(void *recv_comm, int n, void *request);
/* makeVDevice of ncclNet v<api_version>: NCCL allows up to 4 devices (v9..v11) or 8 (v12);
 * braid fuses at most BRAID_VDEV_MAX_NICS. devs: ndevs entries. */
ncclResult_t braid_make_vdevice(int *d, int ndevs, const int *devs, int api_version);

/* v11+ per-communicator context. */
struct braid_ctx {
	uint32_t magic; /* BRAID_MAGIC_CTX */
	uint64_t comm_id;
	struct braid_conn_opts opts; /* opts.prof: NCCL's profiler callback (NULL: none) */
};
ncclResult_t braid_ctx_check(void *ctx, const char *what);

/* Fill the version-independent part of NCCL's properties (all versions share it). */
#define BRAID_FILL_COMMON_PROPS(out, p)                                           \
	do {                                                                      \
		(out)->name = (char *)(p)->name;                                  \
		(out)->pciPath = (p)->pci_path[0] ? (char *)(p)->pci_path : NULL; \
		(out)->guid = (p)->guid;                                          \
		(out)->ptrSupport = (p)->ptr_support;                             \
		(out)->regIsGlobal = (p)->reg_is_global;                          \
		(out)->speed = (p)->speed_mbps;                                   \
		(out)->port = (p)->port;                                          \
		(out)->latency = (p)->latency_us;                                 \
		(out)->maxComms = (p)->max_comms;                                 \
		(out)->maxRecvs = (p)->max_recvs;                                 \
		(out)->netDeviceType = NCCL_NET_DEVICE_HOST;                      \
		(out)->netDeviceVersion = 0;                                      \
	} while (0)

#endif
