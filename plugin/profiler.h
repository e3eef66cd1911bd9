/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profiler events of ncclNet v10 to v12 (docs/profiler.md): when NCCL gave init a profiler
 * callback, each wire operation of a request is one event, started when it is posted and
 * stopped when it completes, parented to the phandle NCCL passed to isend or irecv.
 *
 * The descriptors are NCCL's (src/include/plugin/profiler/net_ib_v1.h, net_socket_v1.h);
 * the plugin id says which one travels: NCCL's profiler plugin reads the type from its
 * high 16 bits and the descriptor's version from its low 16.
 *
 * Nothing here runs without a callback: a comm without one has no braid_prof_comm
 * (NULL), and the backends test that pointer once per request or completion. What runs
 * with one is out of line and cold.
 */
#ifndef BRAID_PROFILER_H
#define BRAID_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_abi.h"

/* NCCL's src/include/plugin/nccl_profiler.h and nccl_common.h */
#define BRAID_PROF_NET_VER_BITS 16
#define BRAID_PROF_NET_TYPE_IB (1LL << BRAID_PROF_NET_VER_BITS)
#define BRAID_PROF_NET_TYPE_SOCK (2LL << BRAID_PROF_NET_VER_BITS)
#define BRAID_PROF_NET_IB_VER 1
#define BRAID_PROF_NET_SOCK_VER 1
enum { BRAID_PROF_EVENT_START = 0, BRAID_PROF_EVENT_STOP = 1 };
enum { BRAID_PROF_QP = 1 << 0, BRAID_PROF_SOCKET = 1 << 0 }; /* ncclProfileQp, ncclProfileSocket */

/* ncclProfilerNetIbDescr_v1_t */
struct braid_prof_ib_descr {
	uint8_t type; /* BRAID_PROF_QP */
	union {
		struct {
			int device; /* the NIC's index within the comm's device (NCCL's devIndex) */
			uint64_t wr_id; /* of the work request */
			int opcode;     /* ibv opcode */
			int qpNum;
			size_t length; /* data bytes of the work request */
		} qp;
	};
};

/* ncclProfilerNetSockDescr_v1_t */
struct braid_prof_sock_descr {
	uint8_t type; /* BRAID_PROF_SOCKET */
	union {
		struct {
			int fd;
			int op;
			size_t length;
		} sock;
	};
};

/* One event: its handle (NCCL's to fill; NULL until then) and what a completion names it
 * by (net_ib: the QP number; a completion of that QP stops its oldest open event). */
struct braid_prof_ev {
	void *eh;
	uint32_t key;
	uint8_t open;
};

/* A request's events. parent: the phandles NCCL gave, one per buffer; all NULL between
 * requests (braid_prof_req_end), so that a request NCCL gave none emits nothing. */
struct braid_prof_req {
	void *parent[8];
	uint16_t nev;
	struct braid_prof_ev ev[];
};

/* A comm's events: one record per request of its pool, by pool index. */
struct braid_prof_comm {
	ncclProfilerCallback_t cb;
	int64_t plugin_id;
	uint32_t nreq;
	uint32_t max_ev; /* events one request may have */
	size_t stride;   /* bytes per record */
	char *rec;
};

/* NULL when out of memory (the comm then runs without events, after a WARN). */
struct braid_prof_comm *braid_prof_comm_new(ncclProfilerCallback_t cb, int64_t plugin_id,
					    uint32_t nreq, uint32_t max_ev);
/* Stops what is still open (requests in flight at close) and frees. NULL: nothing. */
void braid_prof_comm_free(struct braid_prof_comm *pc);

static inline struct braid_prof_req *braid_prof_req_at(const struct braid_prof_comm *pc,
						       uint32_t idx)
{
	return (struct braid_prof_req *)(void *)(pc->rec + (size_t)idx * pc->stride);
}

/* Record idx is armed for the request its pool hands out next (braid_pool_peek), with
 * parents[0..n). fixed: the backend names each event's slot (braid_prof_start_at), so
 * that threads that complete different slots of one request share no counter. */
struct braid_prof_req *braid_prof_req_begin(struct braid_prof_comm *pc, uint32_t idx,
					    void *const *parents, int n, int fixed);
/* The request is done, or was never taken: what is open stops, the parents go. */
void braid_prof_req_end(struct braid_prof_comm *pc, struct braid_prof_req *pr);
/* Start an event of pr under parent[p] with descriptor descr; key: what stops it. */
void braid_prof_start(struct braid_prof_comm *pc, struct braid_prof_req *pr, int p, void *descr,
		      uint32_t key);
/* Start the event of slot (< max_ev) unless it is open; stop it if it is. */
void braid_prof_start_at(struct braid_prof_comm *pc, struct braid_prof_req *pr, int slot, int p,
			 void *descr);
void braid_prof_stop_at(struct braid_prof_comm *pc, struct braid_prof_req *pr, int slot);
/* Stop the oldest open event of pr with this key (none: nothing). */
void braid_prof_stop_key(struct braid_prof_comm *pc, struct braid_prof_req *pr, uint32_t key);
/* Stop every open event of pr from event first on. */
void braid_prof_stop_from(struct braid_prof_comm *pc, struct braid_prof_req *pr, int first);

/*
 * A backend's isend or irecv with NCCL's phandles, for a comm with a callback: the record of
 * the request its pool (reqs) hands out next is armed with them, and disarmed when the
 * call took no request (NCCL calls again). fixed: as braid_prof_req_begin.
 */
typedef ncclResult_t (*braid_prof_isend_fn)(void *comm, void *data, size_t size, int tag,
					    void *mhandle, void **request);
typedef ncclResult_t (*braid_prof_irecv_fn)(void *comm, int n, void **data, const size_t *sizes,
					    const int *tags, void **mhandles, void **request);
struct braid_pool;
ncclResult_t braid_prof_isend(struct braid_prof_comm *pc, const struct braid_pool *reqs, int fixed,
			      braid_prof_isend_fn isend, void *comm, void *data, size_t size,
			      int tag, void *mhandle, void *phandle, void **request);
ncclResult_t braid_prof_irecv(struct braid_prof_comm *pc, const struct braid_pool *reqs, int fixed,
			      braid_prof_irecv_fn irecv, void *comm, int n, void **data,
			      const size_t *sizes, const int *tags, void **mhandles,
			      void **phandles, void **request);

/* The core's side (plugin/core.c): which callback a comm gets. NULL: none (no callback, or
 * BRAID_PROFILER=0). */
ncclProfilerCallback_t braid_prof_use(ncclProfilerCallback_t cb);
/* The callback the comms a listen comm accepts get (NULL: none, and forgets lc). 0, or -1
 * out of memory. */
int braid_prof_listen_set(const void *lc, ncclProfilerCallback_t cb);
ncclProfilerCallback_t braid_prof_listen_get(const void *lc);

#endif
