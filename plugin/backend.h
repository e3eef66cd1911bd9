/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The contract between the version-neutral core and a backend (net_ofi/, net_ib/).
 * Sizes are size_t everywhere but in test(), which writes NCCL's int sizes itself (no
 * copy between layers on the path every message takes); the version adapters convert.
 * The core validates NCCL's arguments (NULL pointers, device range, n, object magic)
 * before calling a backend, so backends handle only what the network does.
 */
#ifndef BRAID_BACKEND_H
#define BRAID_BACKEND_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_net_abi.h"

enum braid_backend_kind {
	BRAID_BACKEND_NONE = 0,
	BRAID_BACKEND_OFI = 1,
	BRAID_BACKEND_IB = 2,
};

/* Every object handed to NCCL starts with one, so a stale or garbage pointer is refused. */
enum braid_obj_magic {
	BRAID_MAGIC_LISTEN = 0x6c697374, /* "list" */
	BRAID_MAGIC_SEND = 0x73656e64,   /* "send" */
	BRAID_MAGIC_RECV = 0x72656376,   /* "recv" */
	BRAID_MAGIC_REQ = 0x72657175,    /* "requ" */
	BRAID_MAGIC_FLUSH = 0x666c7368,  /* "flsh": a backend's flush request (test_flush) */
	BRAID_MAGIC_MR = 0x6d726567,     /* "mreg" */
	BRAID_MAGIC_CTX = 0x63747874,    /* "ctxt" */
	BRAID_MAGIC_DEAD = 0x64656164,   /* "dead": freed */
};

struct braid_obj {
	uint32_t magic;
};

#define BRAID_MAX_RECVS 8

/* A size as test() reports it: an int in every version, so one above INT_MAX cannot be said. */
static inline int braid_size_int(size_t size)
{
	return size > INT_MAX ? INT_MAX : (int)size;
}
#define BRAID_MAX_REQUESTS NCCL_NET_MAX_REQUESTS

/* A device as NCCL sees it: 1 to 8 of the backend's NICs (NCCL_NET_MAX_DEVS_PER_NIC of
 * v12; 4 under v9 to v11, plugin/vdev.c). */
#define BRAID_VDEV_MAX_NICS 8
struct braid_vdev {
	int n;
	int nic[BRAID_VDEV_MAX_NICS]; /* backend device indices, distinct */
};

struct braid_dev_props {
	char name[64];
	char pci_path[256]; /* "" when the device has none */
	int numa_node;      /* of the NIC, from topo/; -1 unknown (not part of NCCL's props) */
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed_mbps;
	int port;
	float latency_us;
	int max_comms;
	int max_recvs;
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
	struct braid_vdev vdev; /* NCCL's vProps: the devices it was made of */
	/* ncclNet v12's railId and planeId (NCCL_NET_ID_UNDEF: unknown). Set by the core
	 * (plugin/net_ids.c), not by the backends: docs/topology.md. */
	int rail_id;
	int plane_id;
};

struct braid_conn_opts {
	int traffic_class; /* NCCL_NET_TRAFFIC_CLASS_UNDEF: none asked */
	/* NCCL's profiler callback for the comm's events (plugin/profiler.h); NULL: none. The
	 * core hands it to the backend with prof_attach, not through connect. */
	ncclProfilerCallback_t prof;
};

struct braid_topo;

/* What the core hands a backend at init: the backends never call up into the core. */
struct braid_backend_env {
	const struct braid_topo *topo; /* hwloc topology; NULL when it could not be loaded */
};

struct braid_backend_ops {
	const char *name;
	enum braid_backend_kind kind;
	/* NICs one comm may stripe over (1: the backend does not fuse NICs). */
	int max_nics;
	/* Open the library and find devices. 0: usable; <0: not, with the reason in why. */
	int (*init)(const struct braid_backend_env *env, char *why, size_t whylen);
	void (*fini)(void);
	int (*ndevs)(void);
	ncclResult_t (*get_props)(int dev, struct braid_dev_props *props);
	/* devices: get_props and ndevs speak of NICs; listen and connect of the device NCCL
	 * chose, whose NICs (1 to max_nics) a comm stripes over */
	ncclResult_t (*listen)(const struct braid_vdev *vd, void *handle, void **listen_comm);
	ncclResult_t (*connect)(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
				void *handle, void **send_comm);
	ncclResult_t (*accept)(void *listen_comm, void **recv_comm);
	ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recv_comm, int n, void **data, const size_t *sizes,
			      const int *tags, void **mhandles, void **request);
	/* The same with NCCL's profiler parents (v10+, which always gives them): phandle,
	 * phandles[0..n), read only by a comm that prof_attach gave a callback. Apart from
	 * isend and irecv so that v8 and v9 pay nothing for them. */
	ncclResult_t (*isend_ph)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				 void *phandle, void **request);
	ncclResult_t (*irecv_ph)(void *recv_comm, int n, void **data, const size_t *sizes,
				 const int *tags, void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recv_comm, int n, void **data, const int *sizes,
			       void **mhandles, void **request);
	/* NCCL's test(): when *done and sizes is not NULL (NCCL passes NULL for a flush), fill
	 * one entry per buffer (braid_size_int). A request reported done (or failed) is freed:
	 * NCCL never tests it again. */
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	/* test() of a request iflush made with BRAID_MAGIC_FLUSH, optional: the core tells
	 * the two apart by magic, on the path where it checks it anyway, so that a backend's
	 * test() of data requests pays nothing for flushes */
	ncclResult_t (*test_flush)(void *request, int *done, int *sizes);
	ncclResult_t (*close_send)(void *send_comm);
	ncclResult_t (*close_recv)(void *recv_comm);
	ncclResult_t (*close_listen)(void *listen_comm);
	/* Profiler events (plugin/profiler.h), optional: from now on the send or receive comm
	 * emits its wire operations' events to cb; detach (before close) ends what is open. */
	void (*prof_attach)(void *comm, ncclProfilerCallback_t cb);
	void (*prof_detach)(void *comm);
};

extern const struct braid_backend_ops braid_ofi_ops;
extern const struct braid_backend_ops braid_ib_ops;

#endif
