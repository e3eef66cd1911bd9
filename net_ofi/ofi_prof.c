// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi's profiler events (plugin/profiler.h, docs/profiler.md). libfabric has no
 * descriptor of NCCL's, so these travel in NCCL's socket one (ncclProfilerNetSockDescr_v1_t,
 * NCCL_PROFILER_NET_TYPE_SOCK | 1), which profilers already read: one event per tagged
 * operation of a request on a lane,
 *
 *  - fd: the lane (the NIC's index within the comm's device: libfabric has no descriptor
 *    to show), op: 0 a send's part (fi_tsend), 1 a receive buffer's part (fi_trecv), as
 *    NCCL_SOCKET_SEND and NCCL_SOCKET_RECV; length: the part's bytes as posted;
 *  - started once the provider took the post (a post it refused for now starts when it
 *    goes, from the backlog), stopped by its completion, or its error;
 *  - announcements (a receiver's buffers, sent to the sender) carry no data of a request:
 *    no events; a lane that carries no part of a send posts nothing: no event.
 *
 * A request's lanes complete on their devices' threads under different locks: each
 * operation has its own slot (lane k's send k; a receive's buffer i on lane k:
 * k * BRAID_MAX_RECVS + i), so no two threads write one.
 */
#include "net_ofi/ofi.h"

#define COLD __attribute__((cold, noinline))

static struct braid_prof_req *rec_of(const struct braid_prof_comm *pc, const struct ofi_comm *c,
				     const struct ofi_req *r)
{
	return braid_prof_req_at(pc, braid_pool_index(&c->reqs, r));
}

static int slot_of(const struct ofi_req *r, const struct ofi_op *op)
{
	return r->is_send ? op->lane : op->lane * BRAID_MAX_RECVS + op->idx;
}

COLD void ofi_prof_attach(void *comm, ncclProfilerCallback_t cb)
{
	struct ofi_comm *c = to_ofi_comm(comm);
	uint32_t max_ev = (uint32_t)c->nlanes * (c->is_send ? 1 : BRAID_MAX_RECVS);

	c->prof = braid_prof_comm_new(cb, BRAID_PROF_NET_TYPE_SOCK | BRAID_PROF_NET_SOCK_VER,
				      c->reqs.nelem, max_ev);
	/* nothing of the comm is posted yet: no thread reads the lanes' copies */
	for (int k = 0; k < c->nlanes; k++)
		c->lane[k].prof = c->prof;
}

/* Under every lane's lock: a completion another comm's thread reaps uses c->prof there. */
COLD void ofi_prof_detach(void *comm)
{
	struct ofi_comm *c = to_ofi_comm(comm);
	struct braid_prof_comm *pc = c->prof;

	if (!pc)
		return;
	/* one lane at a time: lanes may share a device, hence its lock */
	for (int k = 0; k < c->nlanes; k++) {
		pthread_mutex_lock(&c->lane[k].dev->ep_lock);
		c->lane[k].prof = NULL;
		pthread_mutex_unlock(&c->lane[k].dev->ep_lock);
	}
	c->prof = NULL;
	braid_prof_comm_free(pc);
}

COLD void ofi_prof_posted(struct ofi_lane *l, struct ofi_req *r, int idx)
{
	const struct ofi_op *op = r->is_send ? ofi_req_sop(r, l->k)
					     : &ofi_req_recv(r)->rl[l->k].op[idx];
	struct braid_prof_req *pr = rec_of(l->prof, l->comm, r);
	struct braid_prof_sock_descr d = { .type = BRAID_PROF_SOCKET };

	/* not armed (NCCL gave no phandle): braid_prof_start_at finds no parent */

	d.sock.fd = op->lane;
	d.sock.op = r->is_send ? 0 : 1;
	d.sock.length = r->is_send ? r->slen[op->lane] : ofi_req_recv(r)->rl[op->lane].len[op->idx];
	braid_prof_start_at(l->prof, pr, slot_of(r, op), r->is_send ? 0 : op->idx, &d);
}

COLD void ofi_prof_done(struct ofi_lane *l, struct ofi_req *r, const struct ofi_op *op)
{
	braid_prof_stop_at(l->prof, rec_of(l->prof, l->comm, r), slot_of(r, op));
}

COLD void ofi_prof_end(struct ofi_comm *c, struct ofi_req *r)
{
	braid_prof_req_end(c->prof, rec_of(c->prof, c, r));
}
