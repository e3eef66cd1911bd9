// SPDX-License-Identifier: Apache-2.0
/*
 * Failover within a fused device: a comm over several NICs (rails) survives the failure of
 * all but one of them (BRAID_FAILOVER, on by default; docs/ib.md). A NIC fails for a comm
 * when one of its QPs runs out of retries (IBV_WC_RETRY_EXC_ERR), as in NCCL.
 *
 * NCCL's IB transport (p2p_resiliency.cc, 2.29.7) is the reference: a completion error
 * marks the NIC failed; the sender then reads, over a surviving NIC, the receiver's
 * record of which chunks of the message landed, and writes again only those that did
 * not. Here:
 * - Every chunk carries its number in the immediate (ib.h), and the receiver counts a
 *   buffer complete by chunk identity: a chunk that lands twice (on the dead NIC, whose
 *   ACK was lost, and again on a survivor) counts once.
 * - The receiver keeps one word per buffer of each ring slot, (group seq & 0xffff) << 16 |
 *   the chunks landed, registered on every rail for the sender to RDMA-READ (the probe).
 *   A word naming another group means the slot moved on, so the buffer was complete.
 * - The sender keeps, per send in flight, what a replay needs (its plan, data, the
 *   receiver's buffer and keys; ib_fo_send), and posts no new send while a probe or a
 *   replay is under way: a replay then lands before any later data this comm sends into
 *   the same memory.
 * - The receiver's FIFO writes move to a QP on a surviving rail, with the sender's FIFO
 *   key for that rail, and a FIFO write that failed goes again there (the entry is the
 *   same bytes: writing it twice is harmless).
 * - The failed NIC leaves the stripe (plugin/stripe.c): it gets no byte of any later
 *   message, until recovery (ib_recover.c) brings it back once its port is ACTIVE again.
 * Asynchronous QP and device events stay fatal, as do errors on a comm of one NIC.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ib/ib.h"
#include "net_ib/ib_fo.h"
#include "net_ib/ib_wire.h"
#include "plugin/clock.h"
#include "plugin/judge.h"
#include "plugin/log.h"
#include "plugin/numa.h"
#include "plugin/params.h"

/* The rails still alive, as a mask. */
static unsigned rails_alive(const struct ib_comm *c)
{
	return ~(unsigned)c->rail_dead & ((1u << c->nrails) - 1);
}

/* A QP on a rail still alive, and not being drained by recovery, in turn from *turn (-1:
 * none). */
static int live_qp(const struct ib_comm *c, uint32_t turn)
{
	for (int j = 0; j < c->nqps; j++) {
		int i = (int)((turn + (uint32_t)j) % (uint32_t)c->nqps);

		if (!(c->rail_dead >> c->qps[i].rail & 1) && !(c->rj_draining >> i & 1))
			return i;
	}
	return -1;
}

static int reg_all_rails(struct ib_comm *c, void *addr, size_t len, int access, struct ibv_mr **mr,
			 const char *what)
{
	for (int k = 0; k < c->nrails; k++) {
		mr[k] = ibv.reg_mr(c->rails[k].hca->pd, addr, len, access);
		if (!mr[k]) {
			int rc = errno ? errno : EIO;

			BRAID_WARN("ib: registering %s on %s failed: %s", what,
				   c->rails[k].hca->name, strerror(rc));
			return -rc;
		}
	}
	return 0;
}

int ib_fo_build(struct ib_comm *c)
{
	int rc;

	c->fo = c->fo && c->nrails > 1 && braid_param_int(BRAID_P_FAILOVER);
	if (!c->fo)
		return 0;
	if (c->is_send) {
		c->fo_send = calloc(IB_FO_WORDS, sizeof(*c->fo_send));
		if (!c->fo_send)
			return -ENOMEM;
		/* the probes land past the FIFO entries, in the FIFO's allocation */
		c->fo_probe = (uint32_t *)(void *)(c->fifo + IB_RING);
		return reg_all_rails(c, c->fifo, ib_fifo_bytes(c),
				     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, c->fifo_mrs,
				     "the FIFO");
	}
	c->fo_done = braid_numa_alloc(IB_FO_WORDS * sizeof(uint32_t), c->dev->numa_node);
	if (!c->fo_done)
		return -ENOMEM;
	memset(c->fo_done, 0, IB_FO_WORDS * sizeof(uint32_t));
	rc = reg_all_rails(c, c->fo_done, IB_FO_WORDS * sizeof(uint32_t),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, c->done_mr,
			   "the landed-chunk words");
	if (rc)
		return rc;
	/* the FIFO entries the receives write from on every rail, for when the FIFO writes
	 * move to another NIC */
	rc = reg_all_rails(c, c->fifo, ib_fifo_bytes(c), IBV_ACCESS_LOCAL_WRITE, c->fifo_mrs,
			   "the FIFO entries");
	if (rc)
		return rc;
	c->fifo_src_mr = c->fifo_mrs[c->qps[c->fifo_qp].rail];
	return 0;
}

void ib_fo_free(struct ib_comm *c)
{
	for (int k = 0; k < BRAID_VDEV_MAX_NICS; k++) {
		if (c->fifo_mrs[k])
			ibv.dereg_mr(c->fifo_mrs[k]);
		if (c->done_mr[k])
			ibv.dereg_mr(c->done_mr[k]);
	}
	braid_numa_free(c->fo_done, IB_FO_WORDS * sizeof(uint32_t));
	free(c->fo_send);
}

void ib_fo_fill_wire(const struct ib_comm *c, struct ib_wire *w)
{
	/* bit 0: failover; bit 1: recovery too (a braid of wire 7 reads any bit as on) */
	w->failover = (uint8_t)(c->fo |
				(c->fo && braid_param_int(BRAID_P_RECOVERY) && (c->is_send || c->rj))
					<< 1);
	for (int k = 0; c->fo && k < c->nrails; k++) {
		if (c->is_send) {
			w->fifo_rkeys[k] = c->fifo_mrs[k]->rkey;
		} else {
			w->done_addr = (uint64_t)(uintptr_t)c->fo_done;
			w->done_rkey[k] = c->done_mr[k]->rkey;
		}
	}
}

void ib_fo_take_wire(struct ib_comm *c, const struct ib_wire *w)
{
	if (c->is_send) {
		c->fo = c->fo && w->failover && w->done_addr;
		c->rj = (w->failover & 2) && braid_param_int(BRAID_P_RECOVERY);
		c->rem_done_addr = w->done_addr;
		memcpy(c->rem_done_rkey, w->done_rkey, sizeof(c->rem_done_rkey));
	} else {
		c->fo = w->failover && w->nrails > 1;
		c->rj = (w->failover & 2) && braid_param_int(BRAID_P_RECOVERY);
		memcpy(c->rem_fifo_rkeys, w->fifo_rkeys, sizeof(c->rem_fifo_rkeys));
	}
}

/* The comm's failure, as ib_cq.c's: sticky; every later call reports it. */
static void fo_fail(struct ib_comm *c, const char *what, int rc)
{
	BRAID_WARN("ib: failover: %s comm %s %s: %s failed: %s; the comm fails", ib_side(c),
		   c->is_send ? "to" : "from", c->peer, what, strerror(rc));
	c->warned = 1;
	ib_comm_fail(c, ncclSystemError);
}

/*
 * Rail k failed (wc on its QP qi): out of the stripe, FIFO writes off it, one WARN.
 * 0 when it was the comm's last rail: the caller fails the comm as without failover.
 */
static int rail_failed(struct ib_comm *c, int k, const struct ibv_wc *wc, int qi)
{
	const struct ib_rail *rl = &c->rails[k];
	int left;

	c->rail_dead |= (uint8_t)(1u << k);
	left = __builtin_popcount(rails_alive(c));
	/* a receiver whose FIFO QP was on k needs a QP to write them on: none left where the
	 * other rails' QPs are all being drained for recovery */
	if (!left || (!c->is_send && c->qps[c->fifo_qp].rail == k && live_qp(c, 0) < 0))
		return 0;
	c->rail_down_ns[k] = braid_now_ns();
	c->rail_down_bytes[k] = ib_fo_other_bytes(c, k);
	BRAID_WARN("ib: failover: %s comm %s %s: NIC %s:%d failed (QP %#x -> remote QP %#x: %s) "
		   "after %llu bytes over it; its traffic moves to the comm's %d other NIC(s) "
		   "(peer GID %s, BRAID_FAILOVER=on)",
		   ib_side(c), c->is_send ? "to" : "from", c->peer, rl->dev->name, rl->dev->port,
		   wc->qp_num, qi >= 0 ? c->qps[qi].remote_qpn : 0, ibv.wc_status_str(wc->status),
		   (unsigned long long)(rl->ctr ? rl->ctr->bytes : 0), left, c->peer_gid);
	if (rl->ctr)
		rl->ctr->failovers++;
	if (c->ctr)
		c->ctr->failovers++;
	if (c->is_send) {
		braid_stripe_lane_down(&c->stripe, k, 1);
		if (rl->ctr)
			rl->ctr->weight_ppm = 0;
	} else if (c->qps[c->fifo_qp].rail == k) {
		c->fifo_qp = live_qp(c, 0);
		c->rem_fifo_rkey = c->rem_fifo_rkeys[c->qps[c->fifo_qp].peer_rail];
		c->fifo_src_mr = c->fifo_mrs[c->qps[c->fifo_qp].rail];
	}
	return 1;
}

/* A receive's FIFO write failed with its rail: again, on the QP that carries them now. */
static void fifo_repost(struct ib_comm *c, struct ib_req *r)
{
	struct ib_qp *q = &c->qps[c->fifo_qp];
	uint32_t slot = r->seq % IB_RING, len = (uint32_t)r->n * (uint32_t)sizeof(c->fifo[0][0]);
	int rc = ib_qp_post_rdma(q->qp, ib_wr_id(r, IB_WR_FIFO), IBV_WR_RDMA_WRITE,
				 IBV_SEND_SIGNALED, c->fifo[slot], len, c->fifo_src_mr->lkey,
				 c->rem_fifo_addr + (uint64_t)slot * sizeof(c->fifo[0]),
				 c->rem_fifo_rkey);

	if (rc)
		fo_fail(c, "posting a FIFO write again", rc);
}

/* A send lost a chunk (or its probe) with a failed rail. */
static void send_lost(struct ib_comm *c, struct ib_req *r)
{
	if (r->fo == IB_FO_NONE)
		c->fo_busy++; /* no new send until it is settled */
	r->fo = IB_FO_LOST;
	if (--r->pending == 0)
		ib_fo_send_settled(c, r);
}

int ib_fo_wc_error(struct ib_comm *c, const struct ibv_wc *wc, int qi)
{
	unsigned kind = (unsigned)(wc->wr_id & 3);
	struct ib_req *r = (struct ib_req *)(uintptr_t)(wc->wr_id & ~3ULL);
	int draining;
	int k = -1;

	if (qi >= 0) {
		k = c->qps[qi].rail;
	} else if (kind == IB_WR_FLUSH) {
		for (int j = 0; j < c->nrails; j++)
			if (c->rails[j].flush_qp && c->rails[j].flush_qp->qp_num == wc->qp_num)
				k = j;
	}
	/* Recovery's drain marker (a data QP's, or naming the rail on its flush QP) or proof
	 * READ: never a request, whatever became of the comm (ib_recover.c). */
	if (kind == IB_WR_FLUSH && (qi >= 0 || (k >= 0 && (void *)r == (void *)&c->rails[k]))) {
		if (!c->error)
			ib_rj_wr_back(c, 0);
		return 1;
	}
	if (c->error)
		return 0;
	draining = qi >= 0 ? c->rj_draining >> qi & 1 : k >= 0 && (c->rj_flush_draining >> k & 1);
	/* As in NCCL (ncclIbResiliencyCheckErrorNotFatal): a NIC fails for the comm when a QP
	 * of it runs out of retries; any other first error (a remote access error, a flush
	 * behind an async event) is the comm's, and fails it as before. Once the NIC is out,
	 * every error of its QPs is the same failure. A QP that recovery drains (ib_recover.c)
	 * flushes what it holds: handled as a failed NIC's. */
	if (k < 0 || (!draining && !(c->rail_dead >> k & 1) &&
		      (wc->status != IBV_WC_RETRY_EXC_ERR || !rail_failed(c, k, wc, qi))))
		return 0;
	if (qi >= 0 && c->qps[qi].ctr && !draining)
		braid_ctr_add(&c->qps[qi].ctr->errors, 1);
	if (qi >= 0)
		c->qp_err |= (uint16_t)(1u << qi);
	switch (kind) {
	case IB_WR_SEND: /* a data write, or (no request) an adaptive-routing one's data */
		if (r)
			send_lost(c, r);
		break;
	case IB_WR_FIFO: /* receiver: a FIFO write; sender: a probe */
		if (c->is_send)
			send_lost(c, r);
		else
			fifo_repost(c, r);
		break;
	case IB_WR_FLUSH: /* done on the other rails: NCCL's transport ignores it too */
		c->flush_err |= (uint8_t)(1u << k); /* until recovery restarts it */
		r->pending--;
		break;
	default: /* a receive flushed from the dead QP: counted back, never posted again */
		c->qps[qi].rq_reposts++;
		if (draining)
			ib_rj_recv_flushed(c);
		break;
	}
	return 1;
}

static void send_finished(struct ib_comm *c, struct ib_req *r)
{
	r->fo = IB_FO_NONE;
	c->fo_busy--;
	/* a chunk written again over a survivor is not in its NIC's bytes: the device
	 * records then hold less than the comm's */
	if (r->status == ncclSuccess)
		ib_ctr_msg_done(c, BRAID_CTR(tx_bytes), BRAID_CTR(tx_msgs), r->size[0]);
}

void ib_fo_send_settled(struct ib_comm *c, struct ib_req *r)
{
	int qi;
	struct ib_qp *q;
	int rc;

	if (r->fo == IB_FO_REPLAYING) {
		send_finished(c, r);
		return;
	}
	/* Probe: read the receiver's word for this buffer over a surviving rail. */
	qi = live_qp(c, c->next_qp);
	if (qi < 0 || c->error) { /* failed first: send_finished counts a success only */
		braid_judge_req_fail(&r->status, c->error ? c->error : ncclRemoteError);
		send_finished(c, r);
		return;
	}
	q = &c->qps[qi];
	c->fo_probe[r->fo_at] = 0;
	rc = ib_qp_post_rdma(q->qp, ib_wr_id(r, IB_WR_FIFO), IBV_WR_RDMA_READ, IBV_SEND_SIGNALED,
			     &c->fo_probe[r->fo_at], sizeof(uint32_t), c->fifo_mrs[q->rail]->lkey,
			     c->rem_done_addr + (uint64_t)r->fo_at * sizeof(uint32_t),
			     c->rem_done_rkey[q->peer_rail]);
	if (rc) {
		fo_fail(c, "posting a probe", rc);
		braid_judge_req_fail(&r->status, c->error);
		send_finished(c, r);
		return;
	}
	r->fo = IB_FO_PROBING;
	r->pending = 1;
}

/* Chunk j of send s (bytes [off, off + len)) again, over a surviving QP; 0 or -errno. */
static int replay_chunk(struct ib_comm *c, struct ib_req *r, struct ib_fo_send *s, int j,
			size_t off)
{
	int qi = live_qp(c, c->next_qp++);
	struct ib_qp *q;
	struct ibv_sge sge = {
		.addr = (uintptr_t)(s->data + off),
		.length = s->clen[j],
	};
	struct ibv_send_wr wr = {
		.wr_id = ib_wr_id(r, IB_WR_SEND),
		.sg_list = &sge,
		.num_sge = s->clen[j] ? 1 : 0,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(ib_imm_with_chunk(ib_imm(s->seq, s->idx, s->total), j)),
	};
	struct ibv_send_wr *bad;

	if (qi < 0) /* every rail dead or being drained since the probe went */
		return -ENETDOWN;
	q = &c->qps[qi];
	sge.lkey = ib_mr_on(s->m, q->rail)->lkey;
	wr.wr.rdma.remote_addr = s->raddr + off;
	wr.wr.rdma.rkey = s->rkey[q->peer_rail];
	s->qp[j] = (uint8_t)qi;
	return -ibv_post_send(q->qp, &wr, &bad);
}

void ib_fo_probed(struct ib_comm *c, struct ib_req *r)
{
	struct ib_fo_send *s = &c->fo_send[r->fo_at];
	uint32_t w = __atomic_load_n(&c->fo_probe[r->fo_at], __ATOMIC_ACQUIRE);
	uint32_t landed = 0xffff; /* the slot moved on, or another send took the entry: all */
	size_t off = 0;
	int n = 0, rc;

	r->pending = 0;
	if (c->error) { /* the comm failed (its last rail) while the probe was out */
		braid_judge_req_fail(&r->status, c->error);
		send_finished(c, r);
		return;
	}
	if (s->seq == r->seq && (w >> 16) == (r->seq & 0xffff))
		landed = w & 0xffff;
	r->qlanes = 0; /* replays measure no QP, nor mark one */
	r->qmarks = 0;
	for (int j = 0; j < s->total; off += s->clen[j], j++) {
		if ((landed >> j & 1) || !(c->rail_dead >> c->qps[s->qp[j]].rail & 1))
			continue;
		rc = replay_chunk(c, r, s, j, off);
		if (rc) {
			fo_fail(c, "posting a chunk again", -rc);
			break;
		}
		n++;
	}
	if (!n) {
		if (c->error)
			braid_judge_req_fail(&r->status, c->error);
		send_finished(c, r);
		return;
	}
	BRAID_TRACE("ib: failover: send comm to %s: group %u buffer %u: %d of %u chunks again "
		    "(landed %#x)",
		    c->peer, s->seq, s->idx, n, s->total, landed);
	r->fo = IB_FO_REPLAYING;
	r->pending = n;
}

void ib_fo_record(struct ib_comm *c, struct ib_req *r, int idx, const struct ib_plan *p,
		  const char *data, const struct ib_mr *m, const struct ib_fifo_elem *e)
{
	uint16_t at = (uint16_t)((r->seq % IB_RING) * BRAID_MAX_RECVS + (uint32_t)idx);
	struct ib_fo_send *s = &c->fo_send[at];

	r->fo_at = at;
	s->seq = r->seq;
	s->idx = (uint8_t)idx;
	s->total = (uint8_t)p->total;
	/* whole arrays (past total: never read): fixed sizes copy inline, no libc call */
	memcpy(s->qp, p->qp, sizeof(s->qp));
	memcpy(s->clen, p->clen, sizeof(s->clen));
	s->data = data;
	s->m = m;
	s->raddr = e->addr;
	memcpy(s->rkey, e->rkey, sizeof(s->rkey));
}
