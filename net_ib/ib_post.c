// SPDX-License-Identifier: Apache-2.0
/*
 * isend / irecv: the posting half of the FIFO rendezvous of ib.h. The receiver writes its
 * buffers into the sender's FIFO; the sender cuts each message with the one chunker
 * (plan_message) and writes the chunks straight into the buffer. No allocation, no lock
 * and no system call beyond the verbs ones: requests come from the comm's pool.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net_ib/ib.h"
#include "net_ib/ib_fo.h"
#include "plugin/clock.h"
#include "plugin/judge.h"
#include "plugin/log.h"

static int in_mr(const struct ib_mr *m, const void *data, size_t size)
{
	return braid_mr_range_covers(&m->range, data, size);
}

/* The FIFO entries of the current group, once all n are completely written. */
static const struct ib_fifo_elem *group_ready(struct ib_comm *c)
{
	struct ib_fifo_elem *e = c->fifo[c->seq % IB_RING];
	uint32_t want = c->seq + 1;
	uint32_t n = __atomic_load_n(&e[0].seq, __ATOMIC_ACQUIRE) == want ? e[0].n : 0;

	if (n < 1 || n > BRAID_MAX_RECVS)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&e[i].seq, __ATOMIC_ACQUIRE) != want ||
		    __atomic_load_n(&e[i].seq_end, __ATOMIC_ACQUIRE) != want)
			return NULL;
	return e;
}

/* What every WRITE_WITH_IMM of a message shares: set once a message (data_wr_chunk sets
 * the rest for each chunk). */
static inline void data_wr_head(struct ibv_send_wr *wr, struct ibv_sge *sge, struct ib_req *r,
				uint32_t imm)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = ib_wr_id(r, IB_WR_SEND);
	wr->sg_list = sge; /* not NULL even with num_sge 0: some providers read it regardless */
	wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->imm_data = htonl(imm);
}

/* Bytes [off, off + len) of the message over q into the receiver's buffer e: with the keys
 * of the QP's rail here and of the peer's rail it reaches there. */
static inline void data_wr_chunk(struct ibv_send_wr *wr, struct ibv_sge *sge, const struct ib_qp *q,
				 const char *data, size_t off, uint32_t len, const struct ib_mr *m,
				 const struct ib_fifo_elem *e)
{
	sge->addr = (uintptr_t)(data + off);
	sge->length = len;
	sge->lkey = ib_mr_on(m, q->rail)->lkey;
	wr->num_sge = len ? 1 : 0;
	wr->wr.rdma.remote_addr = e->addr + off;
	wr->wr.rdma.rkey = e->rkey[q->peer_rail];
}

/* The WRITE_WITH_IMM of bytes [off, off + len) of the message over q into e, whole. */
static inline void data_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, const struct ib_qp *q,
			   struct ib_req *r, const char *data, size_t off, uint32_t len,
			   const struct ib_mr *m, const struct ib_fifo_elem *e, uint32_t imm)
{
	data_wr_head(wr, sge, r, imm);
	data_wr_chunk(wr, sge, q, data, off, len, m, e);
}

static inline int post_wr(struct ib_comm *c, struct ib_qp *q, struct ibv_send_wr *wr, uint32_t len)
{
	const struct ib_rail *rl = &c->rails[q->rail];
	struct ibv_send_wr *bad;
	int rc = ibv_post_send(q->qp, wr, &bad);

	if (rc) {
		BRAID_WARN("ib: send comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): "
			   "ibv_post_send of %u bytes failed: %s",
			   rl->dev->name, rl->dev->port, q->qp->qp_num, q->remote_qpn, c->peer,
			   c->peer_gid, len, strerror(rc));
		return -rc;
	}
	if (q->ctr) {
		braid_ctr_add(&q->ctr->tx_bytes, len);
		braid_ctr_add(&q->ctr->tx_msgs, 1);
	}
	return 0;
}

/* Bytes [off, off + len) of the message, over QP qi, into the receiver's buffer e: wr and
 * sge hold the message's data_wr_head (the zeroing and what the chunks share, done once a
 * message). */
static inline int post_write(struct ib_comm *c, int qi, struct ibv_send_wr *wr, struct ibv_sge *sge,
			     const char *data, size_t off, uint32_t len, const struct ib_mr *m,
			     const struct ib_fifo_elem *e)
{
	struct ib_qp *q = &c->qps[qi];

	data_wr_chunk(wr, sge, q, data, off, len, m, e);
	return post_wr(c, q, wr, len);
}

/*
 * The same for adaptive routing, as NCCL's IB transport posts it (p2p.cc): the chunk goes
 * as a plain, unsignaled RDMA WRITE, which the fabric may spread over its paths, and then
 * a signaled WRITE_WITH_IMM on the same QP, whose completion at the receiver comes after
 * the data. That second write carries the chunk's size into the receiver's record of the
 * buffer, where NCCL's 0-byte one carries it in the immediate (braid's names the slot, the
 * buffer and the chunk). Out of line: nothing of it is on the path of a message below the
 * threshold.
 */
static __attribute__((noinline)) int post_write_ar(struct ib_comm *c, int qi, struct ib_req *r,
						   const char *data, size_t off, uint32_t len,
						   const struct ib_mr *m,
						   const struct ib_fifo_elem *e, uint32_t imm,
						   int chunk)
{
	struct ib_qp *q = &c->qps[qi];
	uint32_t *rec = &c->ar_recs[r->seq % IB_RING].len[imm & 7][chunk];
	struct ibv_sge sge, rec_sge = { .addr = (uintptr_t)rec,
					.length = sizeof(*rec),
					.lkey = c->ar_mr[q->rail]->lkey };
	struct ibv_send_wr wr, tail;

	*rec = len;
	data_wr(&tail, &sge, q, r, data, off, len, m, e, ib_imm_ar(imm, chunk));
	wr = tail;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = 0;
	wr.wr_id = IB_WR_SEND; /* no request: completes only in error */
	wr.next = &tail;
	tail.sg_list = &rec_sge;
	tail.num_sge = 1;
	tail.wr.rdma.remote_addr = c->rem_ar_addr + (uint64_t)((char *)rec - (char *)c->ar_recs);
	tail.wr.rdma.rkey = c->rem_ar_rkey[q->peer_rail];
	return post_wr(c, q, &wr, len);
}

/* After the peer's goodbye no new request of this comm can ever complete: irecv refuses
 * it (an idle comm at once, a busy one on its tick: braid_link_check_post). */
static ncclResult_t refuse_after_bye(struct ib_comm *c)
{
	braid_link_check_post(c->link, !c->inflight);
	if (!braid_judge_refuse_after_bye(c->link, c->is_send, ib_comm_who, c))
		return ncclSuccess;
	c->warned = 1;
	ib_comm_fail(c, ncclRemoteError);
	return c->error;
}

/*
 * Rail k's part of len bytes over its QPs by their weights (ib_comm.qst[k]): one chunk on
 * each QP that gets a part, appended to p from chunk ci. Only for a part that is one
 * chunk of the rail's max_msg_sz at most, so no QP's part needs cutting again. The
 * message's chunks are accounted when braid_stripe_sample says (p->qlanes, p->qmarks).
 * The new ci, or -EMSGSIZE past IB_MAX_QPS chunks.
 */
static int plan_qp_lanes(struct ib_comm *c, int k, size_t len, struct ib_plan *p, int ci)
{
	size_t qlen[BRAID_STRIPE_MAX_LANES];
	struct braid_stripe *st = &c->qst[k];
	int first, n = braid_stripe_split(st, len, qlen, &first), how;

	if (ci + n > IB_MAX_QPS)
		return -EMSGSIZE;
	for (int i = first; i < st->nlanes; i++) {
		if (!qlen[i])
			continue;
		p->qp[ci] = (uint8_t)(k + i * c->nrails);
		p->clen[ci++] = (uint32_t)qlen[i];
	}
	how = braid_stripe_sample(st);
	if (how != BRAID_STRIPE_SKIP)
		p->qlanes |= (uint8_t)(1u << k);
	if (how == BRAID_STRIPE_MARK)
		p->qmarks |= (uint8_t)(1u << k);
	return ci;
}

/*
 * The one chunker, for a comm of one NIC or several. plugin/stripe.c says how many bytes
 * each rail carries (all of them on one NIC); a rail's part above BRAID_IB_SPLIT_BYTES is
 * cut over the rail's QPs by their weights (plan_qp_lanes), and no chunk is above the
 * rail's port max_msg_sz: a part above it is cut in equal chunks of it over the QPs in
 * turn. Every chunk's immediate carries the total, so the receiver knows when the buffer
 * is complete: at most IB_MAX_QPS chunks. 0, or -EMSGSIZE when the message needs more.
 */
static int plan_message(struct ib_comm *c, size_t size, struct ib_plan *p)
{
	int first = 0, ci = 0;

	p->len[0] = size;
	p->qlanes = 0;
	p->qmarks = 0;
	/* One NIC, one chunk (a message not above the split threshold, or one QP): the QPs
	 * in turn, nothing to weigh. Every small message, so ahead of the general case. */
	if (c->nrails == 1 && (size <= c->split_bytes || c->nqps == 1) &&
	    size <= (c->dev->max_msg_sz & ~(size_t)127)) {
		p->nch[0] = 1;
		p->total = 1;
		p->qp[0] = (uint8_t)(c->nqps == 1 ? 0 : c->next_qp % (uint32_t)c->nqps);
		p->clen[0] = (uint32_t)size;
		return 0;
	}
	/* One NIC whose QPs are weighed, with as many of the comm's sends in flight (not yet
	 * found done by test()) as QPs: the QPs have their work, and cutting this message
	 * would mostly add writes (each a post, a receive completion and its repost). It
	 * goes whole to the QP that would be done with it first, as NCCL's IB transport sends
	 * each message on one QP of a NIC (NCCL_IB_SPLIT_DATA_ON_QPS=0); with fewer in flight
	 * it is cut over the QPs, and split_bytes 0 (NCCL_IB_SPLIT_DATA_ON_QPS=1) cuts every
	 * one. Measured, each one: the choice reads the QPs' backlogs. One pick in 64 says
	 * cut (braid_stripe_pick), so that every QP is measured. */
	if (c->nrails == 1 && (c->qlanes_on & 1) && c->inflight >= c->nqps && c->split_bytes &&
	    size <= (c->dev->max_msg_sz & ~(size_t)127)) {
		int q = braid_stripe_pick(&c->qst[0], size);

		if (q >= 0) {
			p->nch[0] = 1;
			p->total = 1;
			p->qp[0] = (uint8_t)q;
			p->clen[0] = (uint32_t)size;
			p->qlanes = 1;
			return 0;
		}
	}
	if (c->nrails > 1)
		braid_stripe_split(&c->stripe, size, p->len, &first);
	for (int k = 0; k < c->nrails; k++) {
		size_t len = p->len[k], max = c->rails[k].dev->max_msg_sz, ch = len;
		int nq = ib_rail_nqps(c, k), n, was = ci;

		p->nch[k] = 0;
		if (!len && k != first)
			continue;
		if (max >= 256)
			max &= ~(size_t)127;
		if (len > c->split_bytes && nq > 1 && len <= max && (c->qlanes_on >> k & 1)) {
			ci = plan_qp_lanes(c, k, len, p, ci);
			if (ci < 0)
				return ci;
			p->nch[k] = ci - was;
			continue;
		}
		if (len > c->split_bytes && nq > 1)
			ch = ((len + (size_t)nq - 1) / (size_t)nq + 127) & ~(size_t)127;
		if (ch > max)
			ch = max;
		if (len > ch && (len + ch - 1) / ch > IB_MAX_QPS)
			return -EMSGSIZE;
		n = len > ch ? (int)((len + ch - 1) / ch) : 1;
		if (ci + n > IB_MAX_QPS)
			return -EMSGSIZE;
		for (int j = 0; j < n; j++, ci++) {
			p->qp[ci] = (uint8_t)ib_plan_qp(c, k, j);
			p->clen[ci] = (uint32_t)(len < ch ? len : ch);
			len -= p->clen[ci];
		}
		p->nch[k] = n;
	}
	p->total = ci;
	return 0;
}

/*
 * The chunks of plan p, each into e at its offset, for adaptive routing when ar; the
 * striping state of the rails (fused) and of the QPs (p->qlanes) told what went where.
 * The clock only for what is timed from its post: a marking rail's QP chunks are timed
 * by their completion alone (braid_stripe_marked). 0, or the first post's error
 * (*posted went out).
 */
static inline __attribute__((always_inline)) int
post_plan(struct ib_comm *c, struct ib_req *r, const char *data, const struct ib_plan *p,
	  const struct ib_mr *m, const struct ib_fifo_elem *e, uint32_t imm, int ar, int *posted)
{
	int fused = c->nrails > 1, rc = 0, ci = 0;
	uint64_t now = fused || (p->qlanes & ~p->qmarks) ? braid_now_ns() : 0;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	size_t off = 0;

	if (!ar)
		data_wr_head(&wr, &sge, r, imm);

	r->qlanes = p->qlanes;
	r->qmarks = p->qmarks;
	for (int k = 0; k < c->nrails && !rc; k++) {
		int lanes = p->qlanes >> k & 1;

		if (!p->nch[k])
			continue;
		if (fused) {
			braid_stripe_posted(&c->stripe, k, p->len[k], now);
			r->rail_bytes[k] = (uint32_t)p->len[k];
		}
		for (int j = 0; j < p->nch[k]; j++, ci++) {
			int q = p->qp[ci];
			uint32_t n = p->clen[ci];

			if (!ar && ci) /* each chunk names itself (ib.h) */
				wr.imm_data = htonl(ib_imm_with_chunk(imm, ci));
			rc = ar ? post_write_ar(c, q, r, data, off, n, m, e, imm, *posted)
				: post_write(c, q, &wr, &sge, data, off, n, m, e);
			if (rc)
				break;
			if (lanes) {
				r->qp_bytes[q] = n;
				braid_stripe_posted(&c->qst[k], q / c->nrails, n, now);
			}
			r->rail_pending[k] += (uint8_t)fused;
			(*posted)++;
			off += n;
		}
		if (fused && c->rails[k].ctr) {
			braid_ctr_add(&c->rails[k].ctr->bytes, p->len[k]);
			braid_ctr_add(&c->rails[k].ctr->chunks, 1);
		}
	}
	return rc;
}

/* post_plan for a plan of one chunk on a comm of one NIC, measured on its QP lane or not
 * marking: every message below the split threshold, and every one sent whole to a QP,
 * without the loops over rails and chunks. */
static inline int post_one(struct ib_comm *c, struct ib_req *r, const char *data,
			   const struct ib_plan *p, const struct ib_mr *m,
			   const struct ib_fifo_elem *e, uint32_t imm, int *posted)
{
	int qi = p->qp[0], rc;
	struct ib_qp *q = &c->qps[qi];
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	r->qlanes = p->qlanes;
	r->qmarks = 0;
	data_wr(&wr, &sge, q, r, data, 0, p->clen[0], m, e, imm);
	rc = post_wr(c, q, &wr, p->clen[0]);
	*posted = !rc;
	if (!rc && p->qlanes) { /* the clock only for a QP that was idle: its busy mark */
		struct braid_stripe *st = &c->qst[0];

		r->qp_bytes[qi] = p->clen[0];
		braid_stripe_posted(st, qi, p->clen[0],
				    st->lane[qi].outstanding ? 0 : braid_now_ns());
	}
	return rc;
}

/* post_plan for adaptive routing, out of line: a message below the threshold pays one
 * comparison for the feature. */
static __attribute__((noinline)) int
post_plan_ar(struct ib_comm *c, struct ib_req *r, const char *data, const struct ib_plan *p,
	     const struct ib_mr *m, const struct ib_fifo_elem *e, uint32_t imm, int *posted)
{
	return post_plan(c, r, data, p, m, e, imm, 1, posted);
}

ncclResult_t ib_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		      void **request)
{
	struct ib_comm *c = to_ib_comm(send_comm);
	struct ib_mr *m = mhandle;
	const struct ib_fifo_elem *g;
	struct ib_fifo_elem e;
	struct ib_req *r;
	int idx = -1, posted = 0, rc = 0;
	struct ib_plan plan;
	uint32_t gn, imm;

	/* Not refused after the peer's goodbye as such: a receive it posted before is still a
	 * match (braid_judge_refuse_unannounced). */
	if (ib_comm_error(c))
		return c->error;
	if (__builtin_expect(c->fo_busy != 0, 0)) {
		/* a failover replays sends: none goes out before they have landed */
		ib_progress(c);
		return c->error;
	}
	if (!in_mr(m, data, size)) {
		BRAID_WARN("ib: isend of %zu bytes at %p is outside its registration [%#lx, +%zu)",
			   size, data, (unsigned long)m->range.base, m->range.len);
		return ncclInvalidArgument;
	}
	g = group_ready(c);
	if (!g) {
		ib_progress(c);
		if (braid_tick_due(&c->tick_left))
			ib_check_health_at(c, braid_now_ns());
		braid_link_check(c->link, 0); /* its own tick */
		if (!c->error &&
		    braid_judge_refuse_unannounced(c->link, c->sent_upto, ib_comm_who, c)) {
			c->warned = 1;
			ib_comm_fail(c, ncclRemoteError);
		}
		return c->error; /* NULL request: the receiver has not posted yet */
	}
	/* Take what this send needs from the FIFO slot now: g must not be read once the
	 * group's last write is posted. From then on the receiver may complete the group and
	 * reuse the slot for group seq + IB_RING, and its FIFO write can land before
	 * ibv_post_send even returns to us (a sender descheduled there read the next group's
	 * buffer count, never counted this group as done and waited for ever). */
	gn = g[0].n;
	for (uint32_t i = 0; i < gn && idx < 0; i++)
		if (g[i].tag == tag && !(c->used & (1u << i)))
			idx = (int)i;
	if (idx < 0)
		return ncclSuccess; /* no free buffer with this tag yet: NCCL calls again */
	e = g[idx];
	g = NULL;
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess; /* more than maxRecvs x 32 in flight: NCCL retries */
	/* As NCCL's IB transport: a message larger than its buffer arrives truncated. */
	if (size > e.size)
		size = e.size;
	ib_req_start(r, c, IB_REQ_SEND, 1);
	r->size[0] = size;
	r->seq = c->seq;
	r->first = c->sent_upto + (uint64_t)idx;
	if (c->nrails > 1) /* post_plan counts each rail's chunks from 0 */
		memset(r->rail_pending, 0, sizeof(r->rail_pending));
	if (plan_message(c, size, &plan)) {
		braid_pool_put(&c->reqs, r);
		BRAID_WARN("ib: send comm %s:%d (peer %s): a message of %zu bytes needs more than %d "
			   "writes of at most its NICs' max_msg_sz (%u bytes on %s): above the "
			   "device's maxP2pBytes?",
			   c->dev->name, c->dev->port, c->peer, size, IB_MAX_QPS,
			   c->dev->max_msg_sz, c->dev->name);
		return ncclInvalidArgument;
	}
	if (c->fo)
		ib_fo_record(c, r, idx, &plan, data, m, &e);
	/* profiler events (ib_prof.c: isend_ph armed r's record with NCCL's phandle) start as
	 * NCCL's IB transport starts them: before the post */
	if (__builtin_expect(c->prof != NULL, 0))
		ib_prof_send_posting(c, r, &plan, (int64_t)size > c->ar_above);
	imm = ib_imm(c->seq, idx, plan.total);
	if ((int64_t)size > c->ar_above)
		rc = post_plan_ar(c, r, data, &plan, m, &e, imm, &posted);
	else if (plan.total == 1 && c->nrails == 1 && !plan.qmarks)
		rc = post_one(c, r, data, &plan, m, &e, imm, &posted);
	else
		rc = post_plan(c, r, data, &plan, m, &e, imm, 0, &posted);
	c->next_qp++;
	if (rc) {
		ib_comm_fail(c, ncclSystemError);
		c->warned = 1;
		if (__builtin_expect(c->prof != NULL, 0))
			ib_prof_end(c, r, posted); /* what never went out */
		if (!posted) {
			braid_pool_put(&c->reqs, r);
			return c->error;
		}
		/* some chunks are with the NIC: they complete or flush before the comm closes */
	}
	r->pending = posted;
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	c->used |= 1u << idx;
	if (c->used == (1u << gn) - 1) {
		c->used = 0;
		c->seq++;
		c->sent_upto += gn;
	}
	*request = r;
	return c->error;
}

ncclResult_t ib_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		      void **mhandles, void **request)
{
	struct ib_comm *c = to_ib_comm(recv_comm);
	struct ib_fifo_elem *e;
	struct ib_req *r;
	struct ib_qp *q;
	uint32_t slot = c->seq % IB_RING, len;
	int rc, sig;

	if (ib_comm_error(c) || refuse_after_bye(c))
		return c->error;
	for (int i = 0; i < n; i++)
		if (!in_mr(mhandles[i], data[i], sizes[i])) {
			BRAID_WARN("ib: irecv buffer %d (%zu bytes at %p) is outside its registration",
				   i, sizes[i], data[i]);
			return ncclInvalidArgument;
		}
	if (c->inflight >= IB_RING || c->slot[slot])
		return ncclSuccess;
	/* The slot's last FIFO write (IB_RING receives ago) may be unsignaled: its entries are
	 * rewritten only once a completion says it was acknowledged, else a retransmission
	 * could read them half rewritten (IB_FIFO_SIGNAL_EVERY). Almost always so already. */
	if (__builtin_expect((int32_t)(c->seq - IB_RING - c->fifo_acked) >= 0, 0)) {
		ib_progress(c);
		if ((int32_t)(c->seq - IB_RING - c->fifo_acked) >= 0)
			return c->error; /* NULL request: NCCL calls again */
	}
	q = &c->qps[c->fifo_qp];
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess;
	ib_req_start(r, c, IB_REQ_RECV, n);
	e = c->fifo[slot];
	r->seq = c->seq;
	r->first = c->nbufs;
	/* the chunks of each buffer are counted from 0 (two 8-byte stores) */
	memset(r->chunks_want, 0, sizeof(r->chunks_want));
	memset(r->chunks_got, 0, sizeof(r->chunks_got));
	for (int i = 0; i < n; i++) {
		const struct ib_mr *m = mhandles[i];

		r->size[i] = 0;
		r->cap[i] = sizes[i];
		e[i] = (struct ib_fifo_elem){
			.seq = c->seq + 1,
			.n = (uint16_t)n,
			.idx = (uint16_t)i,
			.addr = (uint64_t)(uintptr_t)data[i],
			.size = sizes[i],
			.tag = tags[i],
			.seq_end = c->seq + 1,
		};
		for (int k = 0; k < c->nrails; k++)
			e[i].rkey[k] = ib_mr_on(m, k)->rkey;
		if (c->fo) /* no chunk of it landed yet (ib_failover.c) */
			__atomic_store_n(&c->fo_done[slot * BRAID_MAX_RECVS + (uint32_t)i],
					 (c->seq & 0xffff) << 16, __ATOMIC_RELAXED);
	}
	len = (uint32_t)n * (uint32_t)sizeof(e[0]);
	/* Signaled once in IB_FIFO_SIGNAL_EVERY (always under failover, which reads the
	 * completion), as NCCL's IB transport signals one write of its ring: the request
	 * waits only for that one's completion, and otherwise completes when its data has
	 * landed, which the sender wrote after it read this entry. The write's source is this
	 * slot's entries (c->fifo), rewritten only by the slot's next receive: a write the
	 * NIC sends again (its ACK lost) carries this slot's entries, which are not rewritten
	 * before it is acknowledged (above). An unsignaled write names no request: only a
	 * flush of the QP completes it, in error. */
	sig = c->fo || c->seq % IB_FIFO_SIGNAL_EVERY == 0;
	rc = ib_qp_post_rdma(q->qp, sig ? ib_wr_id(r, IB_WR_FIFO) : ib_wr_id(NULL, IB_WR_FIFO),
			     IBV_WR_RDMA_WRITE,
			     (sig ? IBV_SEND_SIGNALED : 0) |
				     (len <= q->max_inline ? IBV_SEND_INLINE : 0),
			     e, len, c->fifo_src_mr->lkey,
			     c->rem_fifo_addr + (uint64_t)slot * sizeof(c->fifo[0]),
			     c->rem_fifo_rkey);
	if (rc) {
		BRAID_WARN("ib: receive comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): posting "
			   "the FIFO write failed: %s",
			   c->rails[q->rail].dev->name, c->rails[q->rail].dev->port, q->qp->qp_num,
			   q->remote_qpn, c->peer, c->peer_gid, strerror(rc));
		braid_pool_put(&c->reqs, r);
		c->warned = 1;
		ib_comm_fail(c, ncclSystemError);
		return c->error;
	}
	r->pending = n + sig;
	r->magic = BRAID_MAGIC_REQ;
	c->slot[slot] = r;
	c->inflight++;
	c->seq++;
	c->nbufs += (uint64_t)n;
	*request = r;
	return ncclSuccess;
}
