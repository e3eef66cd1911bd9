/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Load an NCCL net plugin the way NCCL does and call any of its ABI versions (v8..v12)
 * through one version-neutral table, so that a test or a benchmark is written once and
 * runs on every exported ncclNetPlugin_vN.
 */
#ifndef BRAID_TOOLS_NETAPI_H
#define BRAID_TOOLS_NETAPI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_abi.h"

#define NETAPI_MIN_VERSION 8
#define NETAPI_MAX_VERSION 12

/* Properties of one device, the union of every version's fields. */
struct net_props {
	char name[256];
	char pci_path[256];
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	int net_device_type;
	int vdev_ndevs;
	int vdev_devs[NCCL_NET_MAX_DEVS_PER_NIC_V12]; /* vProps.devs; v8: {the device} */
	size_t max_p2p_bytes;                         /* v9+; 0 for v8 */
	size_t max_coll_bytes;                        /* v9+; 0 for v8 */
	int max_multi_request_size;                   /* v11; 0 before */
	int rail_id;  /* v12; before it NCCL_NET_ID_UNDEF, as NCCL's shims */
	int plane_id; /* v12; before it NCCL_NET_ID_UNDEF */
};

struct net_api {
	int version;
	const char *name;  /* the plugin's own name field */
	const void *table; /* the ncclNet_vN_t */

	/* v11+: one ctx per call (a communicator); v8..v10: init once, *ctx = NULL. */
	ncclResult_t (*init)(const struct net_api *api, void **ctx, uint64_t comm_id);
	ncclResult_t (*finalize)(const struct net_api *api, void *ctx); /* no-op before v11 */
	ncclResult_t (*devices)(const struct net_api *api, int *ndev);
	ncclResult_t (*get_props)(const struct net_api *api, int dev, struct net_props *props);
	ncclResult_t (*listen)(const struct net_api *api, void *ctx, int dev, void *handle,
			       void **listen_comm);
	ncclResult_t (*connect)(const struct net_api *api, void *ctx, int dev, void *handle,
				void **send_comm);
	ncclResult_t (*accept)(const struct net_api *api, void *listen_comm, void **recv_comm);
	ncclResult_t (*reg_mr)(const struct net_api *api, void *comm, void *data, size_t size,
			       void **mhandle);
	/* regMr with NCCL's pointer type (NCCL_PTR_HOST, NCCL_PTR_CUDA); reg_mr is HOST. */
	ncclResult_t (*reg_mr_type)(const struct net_api *api, void *comm, void *data, size_t size,
				    int type, void **mhandle);
	/* regMrDmaBuf (fd -1: regMr of that type, as NCCL's contract says). */
	ncclResult_t (*reg_mr_dmabuf)(const struct net_api *api, void *comm, void *data,
				      size_t size, int type, uint64_t offset, int fd,
				      void **mhandle);
	ncclResult_t (*dereg_mr)(const struct net_api *api, void *comm, void *mhandle);
	ncclResult_t (*isend)(const struct net_api *api, void *send_comm, void *data, size_t size,
			      int tag, void *mhandle, void **request);
	ncclResult_t (*irecv)(const struct net_api *api, void *recv_comm, int n, void **data,
			      const size_t *sizes, const int *tags, void **mhandles,
			      void **request);
	ncclResult_t (*iflush)(const struct net_api *api, void *recv_comm, int n, void **data,
			       int *sizes, void **mhandles, void **request);
	ncclResult_t (*test)(const struct net_api *api, void *request, int *done, int *sizes);
	ncclResult_t (*close_send)(const struct net_api *api, void *send_comm);
	ncclResult_t (*close_recv)(const struct net_api *api, void *recv_comm);
	ncclResult_t (*close_listen)(const struct net_api *api, void *listen_comm);
	/* v9+: fuse devices; NULL for v8, which has no makeVDevice */
	ncclResult_t (*make_vdevice)(const struct net_api *api, int *d, int ndevs, const int *devs);

	/* v10+ (NCCL's profiler): the callback init passes (NULL: none, as netapi_bind
	 * leaves it), and the phandles isend and irecv pass (NULL: none; isend passes
	 * phandles[0], irecv phandles[0..n)). v8 and v9 have neither. */
	ncclProfilerCallback_t prof;
	void *const *phandles;
};

/*
 * dlopen() a plugin by NCCL's rules: `value` as given, then "libnccl-net-<value>.so";
 * NULL or "" means "libnccl-net.so". RTLD_NOW | RTLD_LOCAL, as NCCL. On success returns
 * the handle and writes the name that loaded into `loaded`; on failure NULL and the
 * dlerror() of each attempt into `err`.
 */
void *netapi_open(const char *value, char *loaded, size_t loaded_len, char *err, size_t err_len);

/* Bind `api` to the plugin's ncclNetPlugin_v<version>. 0 on success, -1 if absent. */
int netapi_bind(void *dl, int version, struct net_api *api);

/* Give back the result's symbolic name: "ncclSuccess", "ncclRemoteError" ... */
const char *netapi_result_str(ncclResult_t r);

/*
 * A logger that prints like NCCL: WARN always, INFO with NCCL_DEBUG=INFO, TRACE with
 * NCCL_DEBUG=TRACE, each line prefixed with netapi_log_prefix. Thread-safe.
 */
void netapi_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
extern char netapi_log_prefix[128];
/* How many WARN lines the plugin logged through netapi_logger. */
unsigned long netapi_warn_count(void);
/* The text of the last WARN the plugin logged ("" none); read it from the thread that
 * made the failing call, once the call has returned. */
void netapi_last_warn(char *buf, size_t len);

#endif /* BRAID_TOOLS_NETAPI_H */
