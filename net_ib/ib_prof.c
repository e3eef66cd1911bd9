// SPDX-License-Identifier: Apache-2.0
/*
 * net_ib's profiler events (plugin/profiler.h, docs/profiler.md), in NCCL's IB descriptor
 * (ncclProfilerNetIbDescr_v1_t, one per work request on a QP):
 *
 *  - send: one event per chunk, started before its post and stopped by its completion.
 *    Under adaptive routing a chunk is two WRs on one QP, the unsignaled RDMA WRITE of the
 *    data and the 4-byte WRITE_WITH_IMM that signals it; as in NCCL's transport the event
 *    is the pair, with the data WR's opcode and length, stopped by the signaled one.
 *  - receive: the RECV WRs are posted ahead for the comm, not for a request, so a
 *    receive's event starts when its chunk's completion names it (device, wr_id, QP,
 *    bytes landed; opcode IBV_WC_RECV_RDMA_WITH_IMM) and stops when test() reports the
 *    request done, as NCCL's receive events stop.
 *  - the receiver's FIFO write (its buffers' announcement) and flush READs carry no data
 *    of a request: no events.
 *
 * Completions of one QP come in order, so a send completion stops the oldest open event
 * of its QP. All of it runs in the comm's calling thread, as its CQ reads do.
 */
#include "net_ib/ib.h"

#define COLD __attribute__((cold, noinline))

static struct braid_prof_req *rec_of(const struct ib_comm *c, const struct ib_req *r)
{
	return braid_prof_req_at(c->prof, braid_pool_index(&c->reqs, r));
}

COLD void ib_prof_attach(void *comm, ncclProfilerCallback_t cb)
{
	struct ib_comm *c = to_ib_comm(comm);
	/* a send has at most IB_MAX_QPS chunks; a receive as many per buffer */
	uint32_t max_ev = c->is_send ? IB_MAX_QPS : BRAID_MAX_RECVS * IB_MAX_QPS;

	c->prof = braid_prof_comm_new(cb, BRAID_PROF_NET_TYPE_IB | BRAID_PROF_NET_IB_VER,
				      c->reqs.nelem, max_ev);
}

COLD void ib_prof_detach(void *comm)
{
	struct ib_comm *c = to_ib_comm(comm);

	braid_prof_comm_free(c->prof);
	c->prof = NULL;
}

COLD void ib_prof_send_posting(struct ib_comm *c, struct ib_req *r, const struct ib_plan *p, int ar)
{
	struct braid_prof_req *pr = rec_of(c, r);
	struct braid_prof_ib_descr d = { .type = BRAID_PROF_QP };

	if (!pr->parent[0])
		return; /* not armed: NCCL gave no phandle */
	d.qp.wr_id = ib_wr_id(r, IB_WR_SEND);
	d.qp.opcode = ar ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
	for (int ci = 0; ci < p->total; ci++) {
		const struct ib_qp *q = &c->qps[p->qp[ci]];

		d.qp.device = q->rail;
		d.qp.qpNum = (int)q->qp->qp_num;
		d.qp.length = p->clen[ci];
		braid_prof_start(c->prof, pr, 0, &d, q->qp->qp_num);
	}
}

COLD void ib_prof_send_done(struct ib_comm *c, struct ib_req *r, uint32_t qpn)
{
	braid_prof_stop_key(c->prof, rec_of(c, r), qpn);
}

COLD void ib_prof_recv_chunk(struct ib_comm *c, struct ib_req *r, int idx, const struct ibv_wc *wc,
			     uint32_t len)
{
	struct braid_prof_ib_descr d = { .type = BRAID_PROF_QP };
	int qi = -1;

	for (int i = 0; i < c->nqps && qi < 0; i++)
		if (c->qps[i].qp->qp_num == wc->qp_num)
			qi = i;
	d.qp.device = qi >= 0 ? c->qps[qi].rail : 0;
	d.qp.wr_id = wc->wr_id;
	d.qp.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	d.qp.qpNum = (int)wc->qp_num;
	d.qp.length = len;
	braid_prof_start(c->prof, rec_of(c, r), idx, &d, wc->qp_num);
}

COLD void ib_prof_end(struct ib_comm *c, struct ib_req *r, int first)
{
	if (first)
		braid_prof_stop_from(c->prof, rec_of(c, r), first);
	else
		braid_prof_req_end(c->prof, rec_of(c, r));
}
