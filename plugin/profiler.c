// SPDX-License-Identifier: Apache-2.0
/*
 * Profiler events: the records and the calls into NCCL's callback (profiler.h). Everything
 * here runs only for a comm that has a callback, so all of it is out of line and cold.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin/log.h"
#include "plugin/params.h"
#include "plugin/pool.h"
#include "plugin/profiler.h"

#define COLD __attribute__((cold, noinline))

/* NCCL's layouts (net_ib_v1.h, net_socket_v1.h, x86-64 and aarch64): NCCL's profiler
 * plugin reads these bytes. */
_Static_assert(offsetof(struct braid_prof_ib_descr, qp.device) == 8, "ib descr device");
_Static_assert(offsetof(struct braid_prof_ib_descr, qp.wr_id) == 16, "ib descr wr_id");
_Static_assert(offsetof(struct braid_prof_ib_descr, qp.opcode) == 24, "ib descr opcode");
_Static_assert(offsetof(struct braid_prof_ib_descr, qp.qpNum) == 28, "ib descr qpNum");
_Static_assert(offsetof(struct braid_prof_ib_descr, qp.length) == 32, "ib descr length");
_Static_assert(sizeof(struct braid_prof_ib_descr) == 40, "ncclProfilerNetIbDescr_v1_t");
_Static_assert(offsetof(struct braid_prof_sock_descr, sock.fd) == 8, "sock descr fd");
_Static_assert(offsetof(struct braid_prof_sock_descr, sock.op) == 12, "sock descr op");
_Static_assert(offsetof(struct braid_prof_sock_descr, sock.length) == 16, "sock descr length");
_Static_assert(sizeof(struct braid_prof_sock_descr) == 24, "ncclProfilerNetSockDescr_v1_t");

/* The record of the request reqs hands out next, armed with parents. */
static struct braid_prof_req *arm(struct braid_prof_comm *pc, const struct braid_pool *reqs,
				  void *const *parents, int n, int fixed)
{
	uint32_t idx = braid_pool_peek(reqs);

	return idx == UINT32_MAX ? NULL : braid_prof_req_begin(pc, idx, parents, n, fixed);
}

COLD ncclResult_t braid_prof_isend(struct braid_prof_comm *pc, const struct braid_pool *reqs,
				   int fixed, braid_prof_isend_fn isend, void *comm, void *data,
				   size_t size, int tag, void *mhandle, void *phandle,
				   void **request)
{
	struct braid_prof_req *pr = arm(pc, reqs, &phandle, 1, fixed);
	ncclResult_t rc = isend(comm, data, size, tag, mhandle, request);

	if (pr && !*request) /* not taken: NCCL calls again */
		braid_prof_req_end(pc, pr);
	return rc;
}

COLD ncclResult_t braid_prof_irecv(struct braid_prof_comm *pc, const struct braid_pool *reqs,
				   int fixed, braid_prof_irecv_fn irecv, void *comm, int n,
				   void **data, const size_t *sizes, const int *tags,
				   void **mhandles, void **phandles, void **request)
{
	struct braid_prof_req *pr = arm(pc, reqs, phandles, n, fixed);
	ncclResult_t rc = irecv(comm, n, data, sizes, tags, mhandles, request);

	if (pr && !*request)
		braid_prof_req_end(pc, pr);
	return rc;
}

ncclProfilerCallback_t braid_prof_use(ncclProfilerCallback_t cb)
{
	int64_t want = braid_param_int(BRAID_P_PROFILER);

	/* NCCL passes its callback with or without a profiler plugin: by default the events
	 * are emitted only when one is named, since each costs the data path. */
	if (want < 0) {
		const char *name = getenv("NCCL_PROFILER_PLUGIN");

		want = name && name[0] && strcasecmp(name, "none") != 0;
	}
	return cb && want ? cb : NULL;
}

COLD struct braid_prof_comm *braid_prof_comm_new(ncclProfilerCallback_t cb, int64_t plugin_id,
						 uint32_t nreq, uint32_t max_ev)
{
	struct braid_prof_comm *pc = calloc(1, sizeof(*pc));
	size_t stride = sizeof(struct braid_prof_req) + max_ev * sizeof(struct braid_prof_ev);

	stride = (stride + 15) & ~(size_t)15;
	if (pc)
		pc->rec = calloc(nreq, stride);
	if (!pc || !pc->rec) {
		BRAID_WARN("profiler: no memory for the events of %u requests (%zu bytes): this "
			   "comm emits none",
			   nreq, (size_t)nreq * stride);
		free(pc);
		return NULL;
	}
	pc->cb = cb;
	pc->plugin_id = plugin_id;
	pc->nreq = nreq;
	pc->max_ev = max_ev;
	pc->stride = stride;
	return pc;
}

/* A profiler that fails is not a reason to fail the data: said once, then ignored. */
static COLD void call(struct braid_prof_comm *pc, void **eh, int type, void *parent, void *descr)
{
	static int warned;
	ncclResult_t rc = pc->cb(eh, type, parent,
				 type == BRAID_PROF_EVENT_START ? pc->plugin_id : 0, descr);

	if (rc != ncclSuccess && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		BRAID_WARN("profiler: NCCL's callback returned %d for a %s event (said once)",
			   (int)rc, type == BRAID_PROF_EVENT_START ? "start" : "stop");
}

COLD void braid_prof_stop_from(struct braid_prof_comm *pc, struct braid_prof_req *pr, int first)
{
	for (int i = first; i < pr->nev; i++) {
		if (!pr->ev[i].open)
			continue;
		pr->ev[i].open = 0;
		call(pc, &pr->ev[i].eh, BRAID_PROF_EVENT_STOP, NULL, NULL);
	}
}

COLD void braid_prof_req_end(struct braid_prof_comm *pc, struct braid_prof_req *pr)
{
	braid_prof_stop_from(pc, pr, 0);
	for (int i = 0; i < (int)(sizeof(pr->parent) / sizeof(pr->parent[0])); i++)
		pr->parent[i] = NULL;
}

COLD void braid_prof_comm_free(struct braid_prof_comm *pc)
{
	if (!pc)
		return;
	for (uint32_t i = 0; i < pc->nreq; i++)
		braid_prof_stop_from(pc, braid_prof_req_at(pc, i), 0);
	free(pc->rec);
	free(pc);
}

COLD struct braid_prof_req *braid_prof_req_begin(struct braid_prof_comm *pc, uint32_t idx,
						 void *const *parents, int n, int fixed)
{
	struct braid_prof_req *pr = braid_prof_req_at(pc, idx);

	braid_prof_stop_from(pc, pr, 0); /* none open: a request's test closes its events */
	pr->nev = fixed ? (uint16_t)pc->max_ev : 0;
	for (int i = 0; i < (int)(sizeof(pr->parent) / sizeof(pr->parent[0])); i++)
		pr->parent[i] = NULL;
	for (int i = 0; i < n && i < (int)(sizeof(pr->parent) / sizeof(pr->parent[0])); i++)
		pr->parent[i] = parents ? parents[i] : NULL;
	return pr;
}

COLD void braid_prof_start(struct braid_prof_comm *pc, struct braid_prof_req *pr, int p,
			   void *descr, uint32_t key)
{
	struct braid_prof_ev *ev;

	if (pr->nev >= pc->max_ev || !pr->parent[p])
		return; /* no room (the backend sized it) or no parent to hang it on */
	ev = &pr->ev[pr->nev++];
	ev->eh = NULL; /* NCCL's callback leaves it alone when its profiler wants no event */
	ev->key = key;
	ev->open = 1;
	call(pc, &ev->eh, BRAID_PROF_EVENT_START, pr->parent[p], descr);
}

COLD void braid_prof_start_at(struct braid_prof_comm *pc, struct braid_prof_req *pr, int slot,
			      int p, void *descr)
{
	struct braid_prof_ev *ev = &pr->ev[slot];

	if (ev->open || !pr->parent[p])
		return; /* started once (a post the provider refused comes again) or no parent */
	ev->eh = NULL;
	ev->open = 1;
	call(pc, &ev->eh, BRAID_PROF_EVENT_START, pr->parent[p], descr);
}

COLD void braid_prof_stop_at(struct braid_prof_comm *pc, struct braid_prof_req *pr, int slot)
{
	struct braid_prof_ev *ev = &pr->ev[slot];

	if (!ev->open)
		return;
	ev->open = 0;
	call(pc, &ev->eh, BRAID_PROF_EVENT_STOP, NULL, NULL);
}

COLD void braid_prof_stop_key(struct braid_prof_comm *pc, struct braid_prof_req *pr, uint32_t key)
{
	for (int i = 0; i < pr->nev; i++) {
		if (!pr->ev[i].open || pr->ev[i].key != key)
			continue;
		pr->ev[i].open = 0;
		call(pc, &pr->ev[i].eh, BRAID_PROF_EVENT_STOP, NULL, NULL);
		return;
	}
}

/*
 * The callbacks of listen comms: NCCL's accept takes no context, so the comms it makes
 * get the callback their listen comm was made with. A list: a process has few listen
 * comms, and accept is no data path.
 */
struct prof_listen {
	const void *lc;
	ncclProfilerCallback_t cb;
	struct prof_listen *next;
};
static pthread_mutex_t listen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct prof_listen *listens;

int braid_prof_listen_set(const void *lc, ncclProfilerCallback_t cb)
{
	struct prof_listen **p, *l = NULL;
	int rc = 0;

	pthread_mutex_lock(&listen_lock);
	for (p = &listens; *p && (*p)->lc != lc; p = &(*p)->next)
		;
	if (*p && !cb) {
		l = *p;
		*p = l->next;
	} else if (*p) {
		(*p)->cb = cb;
	} else if (cb) {
		l = malloc(sizeof(*l));
		if (l) {
			*l = (struct prof_listen){ .lc = lc, .cb = cb, .next = listens };
			listens = l;
			l = NULL;
		} else {
			rc = -1;
		}
	}
	pthread_mutex_unlock(&listen_lock);
	free(l);
	return rc;
}

ncclProfilerCallback_t braid_prof_listen_get(const void *lc)
{
	ncclProfilerCallback_t cb = NULL;

	pthread_mutex_lock(&listen_lock);
	for (const struct prof_listen *l = listens; l; l = l->next)
		if (l->lc == lc)
			cb = l->cb;
	pthread_mutex_unlock(&listen_lock);
	return cb;
}
