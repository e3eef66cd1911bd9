// SPDX-License-Identifier: Apache-2.0
/*
 * isend / irecv / test: the FIFO rendezvous of ib.h. No allocation, no lock and no
 * system call on this path beyond the verbs ones: requests come from the comm's pool, and
 * the liveness checks (peer socket, async events, port state) run at most every
 * BRAID_LIVENESS_MS while a request waits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net_ib/ib.h"
#include "plugin/clock.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define CQ_BATCH 32
#define RQ_REPOST_BATCH 16

static void comm_fail(struct ib_comm *c, ncclResult_t why)
{
	if (c->error == ncclSuccess) {
		c->error = why;
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
	}
}

static void req_fail(struct ib_req *r, ncclResult_t why)
{
	if (r->status == ncclSuccess)
		r->status = why;
}

static const char *side(const struct ib_comm *c)
{
	return c->is_send ? "send" : "receive";
}

static int qp_index(const struct ib_comm *c, uint32_t qpn)
{
	for (int i = 0; i < c->nqps; i++)
		if (c->qps[i].qp->qp_num == qpn)
			return i;
	return -1;
}

static void check_health(struct ib_comm *c);

/* The rail of QP qi (rail 0 when it is none of the data QPs: a flush QP, say). */
static const struct ib_rail *rail_of(const struct ib_comm *c, int qi)
{
	return &c->rails[qi >= 0 ? c->qps[qi].rail : 0];
}

static ncclResult_t wc_result(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR: return ncclRemoteError;
	default: return ncclSystemError;
	}
}

static void handle_wc_error(struct ib_comm *c, const struct ibv_wc *wc)
{
	int qi = qp_index(c, wc->qp_num);
	unsigned kind = (unsigned)(wc->wr_id & 3);

	if (kind == IB_WR_SEND || kind == IB_WR_FIFO || kind == IB_WR_FLUSH) {
		struct ib_req *r = (struct ib_req *)(uintptr_t)(wc->wr_id & ~3ULL);

		/* a flushed request fails with what failed the comm */
		req_fail(r, wc->status == IBV_WC_WR_FLUSH_ERR && c->error ? c->error
									  : wc_result(wc->status));
		r->pending--;
	} else if (kind == IB_WR_RECV && qi >= 0) {
		c->qps[qi].rq_reposts++; /* gone with the QP; counted so nothing reposts */
	}
	if (qi >= 0 && c->qps[qi].ctr)
		braid_ctr_add(&c->qps[qi].ctr->errors, 1);
	if (c->error != ncclSuccess || c->warned) {
		BRAID_TRACE("ib: further completion error on %s:%d QP %#x: %s", c->dev->name,
			    c->dev->port, wc->qp_num, ibv.wc_status_str(wc->status));
		comm_fail(c, wc_result(wc->status));
		return;
	}
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		/* A flush is an echo: the cause may be an async event (e.g. an access error
		 * this side served). Name that instead, when there is one. */
		ib_async_poll(c->hca);
		if (__atomic_load_n(&c->async_error, __ATOMIC_ACQUIRE)) {
			c->next_liveness_ns = 0;
			check_health(c);
			return;
		}
	}
	c->warned = 1;
	BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): %s completion "
		   "error: %s (status %d, vendor error %#x)",
		   side(c), rail_of(c, qi)->dev->name, rail_of(c, qi)->dev->port, wc->qp_num,
		   qi >= 0 ? c->qps[qi].remote_qpn : 0, c->peer, c->peer_gid,
		   kind == IB_WR_SEND    ? "data write"
		   : kind == IB_WR_FIFO  ? "FIFO write"
		   : kind == IB_WR_FLUSH ? "flush READ"
					 : "receive",
		   ibv.wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
	comm_fail(c, wc_result(wc->status));
}

/* A data chunk landed in one of our buffers. */
static void data_arrived(struct ib_comm *c, const struct ibv_wc *wc)
{
	uint32_t imm = ntohl(wc->imm_data);
	uint32_t seq8 = (imm >> 3) & 0xff;
	int idx = (int)(imm & 7), nch = ib_imm_chunks(imm);
	struct ib_req *r = c->slot[seq8 % IB_RING];
	int qi = qp_index(c, wc->qp_num);

	if ((imm >> 24) != IB_IMM_MAGIC || !r || (r->seq & 0xff) != seq8 || idx >= r->n ||
	    (r->chunks_want[idx] && r->chunks_want[idx] != nch) || r->chunks_got[idx] >= nch) {
		if (!c->warned) {
			c->warned = 1;
			BRAID_WARN("ib: receive comm %s:%d QP %#x (peer %s, GID %s): protocol error: "
				   "data for group %u buffer %d (imm %#x) while at group %u",
				   rail_of(c, qi)->dev->name, rail_of(c, qi)->dev->port, wc->qp_num,
				   c->peer, c->peer_gid, seq8, idx, imm, c->seq);
		}
		comm_fail(c, ncclRemoteError);
		return;
	}
	r->chunks_want[idx] = (uint8_t)nch;
	r->chunks_got[idx]++;
	r->size[idx] += wc->byte_len;
	if (qi >= 0 && c->qps[qi].ctr) {
		braid_ctr_add(&c->qps[qi].ctr->rx_bytes, wc->byte_len);
		braid_ctr_add(&c->qps[qi].ctr->rx_msgs, 1);
	}
	if (qi >= 0 && c->nrails > 1 && c->rails[c->qps[qi].rail].ctr) {
		braid_ctr_add(&c->rails[c->qps[qi].rail].ctr->bytes, wc->byte_len);
		braid_ctr_add(&c->rails[c->qps[qi].rail].ctr->chunks, 1);
	}
	if (r->chunks_got[idx] == nch) {
		r->pending--;
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(rx_bytes), r->size[idx]);
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(rx_msgs), 1);
	}
}

/* A sender's chunk on a rail completed: the rail's part of r is done once all are. */
static void rail_chunk_done(struct ib_comm *c, struct ib_req *r, uint32_t qpn)
{
	int qi = qp_index(c, qpn), k;

	if (qi < 0)
		return;
	k = c->qps[qi].rail;
	if (r->rail_pending[k] && !--r->rail_pending[k])
		braid_stripe_completed(&c->stripe, k, r->rail_bytes[k], braid_now_ns());
}

/* After a CQ read on a sender over several rails: the stripe's goodput samples, the
 * rails' counters, and a NIC that runs slow is named once. */
static void stripe_reaped(struct ib_comm *c)
{
	double rate, others;
	struct ib_rail *rl;
	int slow;

	braid_stripe_reaped(&c->stripe);
	for (int k = 0; k < c->nrails; k++) {
		rl = &c->rails[k];
		if (!rl->ctr)
			continue;
		rl->ctr->weight_ppm = (uint32_t)(braid_stripe_weight(&c->stripe, k) * 1e6);
		rl->ctr->rate_bps = (uint64_t)braid_stripe_rate(&c->stripe, k);
	}
	slow = braid_stripe_slow_lane(&c->stripe, &rate, &others);
	if (slow < 0)
		return;
	rl = &c->rails[slow];
	BRAID_WARN("ib: send comm to %s: NIC %s:%d carries %.0f MB/s, under half the %.0f MB/s of "
		   "the comm's other NICs; striping gives it less (BRAID_STRIPE=%s). Check its "
		   "link speed and the path to the peer.",
		   c->peer, rl->dev->name, rl->dev->port, rate / 1e6, others / 1e6,
		   braid_param_int(BRAID_P_STRIPE) ? "equal" : "adaptive");
	if (rl->ctr)
		rl->ctr->slow = 1;
	braid_ctr_add(&rl->dev->ctr->slow_lanes, 1);
}

static void handle_wc(struct ib_comm *c, const struct ibv_wc *wc)
{
	struct ib_req *r = (struct ib_req *)(uintptr_t)(wc->wr_id & ~3ULL);

	if (wc->status != IBV_WC_SUCCESS) {
		handle_wc_error(c, wc);
		return;
	}
	switch (wc->wr_id & 3) {
	case IB_WR_SEND:
		if (c->nrails > 1)
			rail_chunk_done(c, r, wc->qp_num);
		if (--r->pending == 0 && r->status == ncclSuccess) {
			braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(tx_bytes), r->size[0]);
			braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(tx_msgs), 1);
		}
		break;
	case IB_WR_FIFO:
	case IB_WR_FLUSH: r->pending--; break;
	case IB_WR_RECV:
		c->qps[wc->wr_id >> 2].rq_reposts++;
		data_arrived(c, wc);
		break;
	default: break;
	}
}

static void progress(struct ib_comm *c)
{
	struct ibv_wc wc[CQ_BATCH];
	int n;

	for (int k = 0; k < c->nrails; k++) {
		struct ib_rail *rl = &c->rails[k];

		do {
			n = ibv_poll_cq(rl->cq, CQ_BATCH, wc);
			for (int i = 0; i < n; i++)
				handle_wc(c, &wc[i]);
		} while (n == CQ_BATCH);
		if (n < 0) {
			BRAID_WARN("ib: ibv_poll_cq on %s:%d (peer %s) failed", rl->dev->name,
				   rl->dev->port, c->peer);
			comm_fail(c, ncclSystemError);
		}
	}
	if (c->is_send && c->nrails > 1)
		stripe_reaped(c);
	if (c->is_send || c->error)
		return;
	for (int i = 0; i < c->nqps; i++) {
		struct ib_qp *q = &c->qps[i];
		int rc;

		if (q->rq_reposts < RQ_REPOST_BATCH)
			continue;
		rc = ib_qp_post_recvs(c, q, q->rq_reposts);
		q->rq_reposts = 0;
		if (rc) {
			BRAID_WARN("ib: receive comm %s:%d QP %#x: reposting receives failed: %s",
				   c->rails[q->rail].dev->name, c->rails[q->rail].dev->port,
				   q->qp->qp_num, strerror(-rc));
			comm_fail(c, ncclSystemError);
		}
	}
}

/* The first rail whose port went down, or -1. */
static int rail_down(const struct ib_comm *c)
{
	for (int k = 0; k < c->nrails; k++)
		if (__atomic_load_n(&c->rails[k].dev->port_down, __ATOMIC_ACQUIRE))
			return k;
	return -1;
}

/* While something waits: is the peer process there, did an async event or a port going
 * down hit this comm? */
static void check_health(struct ib_comm *c)
{
	uint64_t now = braid_now_ns();
	int async;

	if (now < c->next_liveness_ns || c->error)
		return;
	c->next_liveness_ns = now + (uint64_t)braid_param_int(BRAID_P_LIVENESS_MS) * 1000000ULL;
	for (int k = 0; k < c->nrails; k++)
		ib_async_poll(c->rails[k].hca);
	async = __atomic_load_n(&c->async_error, __ATOMIC_ACQUIRE);
	if (async) {
		const struct ib_qp *q = &c->qps[c->async_qp];

		BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): %s",
			   side(c), c->rails[q->rail].dev->name, c->rails[q->rail].dev->port,
			   q->qp->qp_num, q->remote_qpn, c->peer, c->peer_gid, c->async_why);
		comm_fail(c, (ncclResult_t)async);
	} else if (rail_down(c) >= 0) {
		const struct ib_rail *rl = &c->rails[rail_down(c)];
		const struct ib_qp *q = &c->qps[rl - c->rails];

		BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): port %d is "
			   "down (IBV_EVENT_PORT_ERR) with %d request(s) in flight%s",
			   side(c), rl->dev->name, rl->dev->port, q->qp->qp_num, q->remote_qpn,
			   c->peer, c->peer_gid, rl->dev->port, c->inflight,
			   c->nrails > 1 ? "; the comm's other NICs are not used in its place"
					 : "");
		comm_fail(c, ncclSystemError);
	} else {
		enum braid_link_state was = c->link->state;

		switch (braid_link_check(c->link, 1)) {
		case BRAID_LINK_FAILED:
			BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): the "
				   "peer reports: %s",
				   side(c), c->dev->name, c->dev->port, c->qps[0].qp->qp_num,
				   c->qps[0].remote_qpn, c->peer, c->peer_gid, c->link->peer_why);
			comm_fail(c, c->link->peer_code == ncclInvalidUsage ? ncclInvalidUsage
									    : ncclRemoteError);
			break;
		case BRAID_LINK_DEAD:
			BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): the "
				   "peer hung up without closing its comm (process exited or "
				   "killed?) with %d request(s) in flight",
				   side(c), c->dev->name, c->dev->port, c->qps[0].qp->qp_num,
				   c->qps[0].remote_qpn, c->peer, c->peer_gid, c->inflight);
			comm_fail(c, ncclRemoteError);
			break;
		case BRAID_LINK_BYE:
			if (was != BRAID_LINK_BYE)
				BRAID_INFO(NCCL_NET,
					   "ib: %s comm %s:%d: peer %s closed its comm, %d "
					   "request(s) in flight here",
					   side(c), c->dev->name, c->dev->port, c->peer,
					   c->inflight);
			break;
		default: break;
		}
	}
	if (c->error)
		c->warned = 1;
}

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

/* Bytes [off, off + len) of the message, over QP qi, into the receiver's buffer e: with
 * the keys of the QP's rail here and of the peer's rail it reaches there. */
static int post_write(struct ib_comm *c, int qi, struct ib_req *r, const char *data, size_t off,
		      uint32_t len, const struct ib_mr *m, const struct ib_fifo_elem *e,
		      uint32_t imm)
{
	struct ib_qp *q = &c->qps[qi];
	const struct ib_rail *rl = &c->rails[q->rail];
	struct ibv_sge sge = { .addr = (uintptr_t)(data + off),
			       .length = len,
			       .lkey = ib_mr_on(m, q->rail)->lkey };
	struct ibv_send_wr wr, *bad;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ib_wr_id(r, IB_WR_SEND);
	wr.sg_list = &sge; /* not NULL even with num_sge 0: some providers read it regardless */
	wr.num_sge = len ? 1 : 0;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = e->addr + off;
	wr.wr.rdma.rkey = e->rkey[q->peer_rail];
	rc = ibv_post_send(q->qp, &wr, &bad);
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

static ncclResult_t comm_error(struct ib_comm *c)
{
	int async;

	if (c->error)
		return c->error;
	async = __atomic_load_n(&c->async_error, __ATOMIC_RELAXED);
	if (async) {
		c->next_liveness_ns = 0;
		check_health(c);
	}
	return c->error;
}

/* After the peer's goodbye no new request of this comm can ever complete. */
static ncclResult_t refuse_after_bye(struct ib_comm *c)
{
	braid_link_check(c->link, 0);
	if (c->link->state != BRAID_LINK_BYE)
		return ncclSuccess;
	BRAID_WARN("ib: %s comm %s:%d: peer %s closed its comm; no %s can complete any more",
		   side(c), c->dev->name, c->dev->port, c->peer, c->is_send ? "send" : "receive");
	c->warned = 1;
	comm_fail(c, ncclRemoteError);
	return c->error;
}

/* The QPs of rail k: k, k + nrails, ... */
static int rail_nqps(const struct ib_comm *c, int k)
{
	return (c->nqps - k + c->nrails - 1) / c->nrails;
}

/* How a message goes out: bytes, chunk size and chunk count per rail. */
struct ib_plan {
	size_t len[BRAID_VDEV_MAX_NICS];
	size_t chunk[BRAID_VDEV_MAX_NICS];
	int nch[BRAID_VDEV_MAX_NICS]; /* 0: the rail carries nothing */
	int total;
};

/*
 * The one chunker, for a comm of one NIC or several. plugin/stripe.c says how many bytes
 * each rail carries (all of them on one NIC); a rail's part above BRAID_IB_SPLIT_BYTES is
 * cut over the rail's QPs, and no chunk is above the rail's port max_msg_sz (the part then
 * takes more chunks than the rail has QPs). Every chunk's immediate carries the total, so
 * the receiver knows when the buffer is complete: at most IB_MAX_QPS chunks. 0, or -EMSGSIZE
 * when the message needs more.
 */
static int plan_message(struct ib_comm *c, size_t size, struct ib_plan *p)
{
	int first = 0;

	p->len[0] = size;
	if (c->nrails > 1)
		braid_stripe_split(&c->stripe, size, p->len, &first);
	p->total = 0;
	for (int k = 0; k < c->nrails; k++) {
		size_t len = p->len[k], max = c->rails[k].dev->max_msg_sz, ch = len;
		int nq = rail_nqps(c, k);

		p->nch[k] = 0;
		if (!len && k != first)
			continue;
		if (len > c->split_bytes && nq > 1)
			ch = ((len + (size_t)nq - 1) / (size_t)nq + 127) & ~(size_t)127;
		if (ch > max)
			ch = max >= 256 ? max & ~(size_t)127 : max;
		if (len > ch && (len + ch - 1) / ch > IB_MAX_QPS)
			return -EMSGSIZE;
		p->chunk[k] = ch;
		p->nch[k] = len > ch ? (int)((len + ch - 1) / ch) : 1;
		p->total += p->nch[k];
	}
	return p->total > IB_MAX_QPS ? -EMSGSIZE : 0;
}

/*
 * The chunks of plan p: rail k's over its QPs in turn from next_qp, each into e at its
 * offset. 0, or the first post's error (*posted went out).
 */
static int post_plan(struct ib_comm *c, struct ib_req *r, const char *data, const struct ib_plan *p,
		     const struct ib_mr *m, const struct ib_fifo_elem *e, uint32_t imm, int *posted)
{
	int fused = c->nrails > 1, rc = 0;
	uint64_t now = fused ? braid_now_ns() : 0;
	size_t off = 0;

	for (int k = 0; k < c->nrails && !rc; k++) {
		uint32_t nq = (uint32_t)rail_nqps(c, k);
		size_t left = p->len[k];

		if (!p->nch[k])
			continue;
		if (fused) {
			braid_stripe_posted(&c->stripe, k, left, now);
			r->rail_bytes[k] = (uint32_t)left;
		}
		for (int j = 0; j < p->nch[k]; j++) {
			int q = k + (int)((c->next_qp + (uint32_t)j) % nq) * c->nrails;
			uint32_t n = (uint32_t)(left < p->chunk[k] ? left : p->chunk[k]);

			rc = post_write(c, q, r, data, off, n, m, e, imm);
			if (rc)
				break;
			r->rail_pending[k] += (uint8_t)fused;
			(*posted)++;
			off += n;
			left -= n;
		}
		if (fused && c->rails[k].ctr) {
			braid_ctr_add(&c->rails[k].ctr->bytes, p->len[k]);
			braid_ctr_add(&c->rails[k].ctr->chunks, 1);
		}
	}
	return rc;
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
	uint32_t gn;

	if (comm_error(c) || refuse_after_bye(c))
		return c->error;
	if (!in_mr(m, data, size)) {
		BRAID_WARN("ib: isend of %zu bytes at %p is outside its registration [%#lx, +%zu)",
			   size, data, (unsigned long)m->range.base, m->range.len);
		return ncclInvalidArgument;
	}
	g = group_ready(c);
	if (!g) {
		progress(c);
		check_health(c);
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
	r->comm = c;
	r->kind = IB_REQ_SEND;
	r->n = 1;
	r->size[0] = size;
	r->seq = c->seq;
	r->first = c->sent_upto + (uint64_t)idx;
	if (plan_message(c, size, &plan)) {
		braid_pool_put(&c->reqs, r);
		BRAID_WARN("ib: send comm %s:%d (peer %s): a message of %zu bytes needs more than %d "
			   "writes of at most its NICs' max_msg_sz (%u bytes on %s): above the "
			   "device's maxP2pBytes?",
			   c->dev->name, c->dev->port, c->peer, size, IB_MAX_QPS,
			   c->dev->max_msg_sz, c->dev->name);
		return ncclInvalidArgument;
	}
	rc = post_plan(c, r, data, &plan, m, &e, ib_imm(c->seq, idx, plan.total), &posted);
	c->next_qp++;
	if (rc) {
		comm_fail(c, ncclSystemError);
		c->warned = 1;
		if (!posted) {
			braid_pool_put(&c->reqs, r);
			return c->error;
		}
		/* some chunks are with the NIC: they complete or flush before the comm closes */
	}
	r->pending = posted;
	r->posted_ns = braid_now_ns();
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
	struct ib_req *r;
	uint32_t slot = c->seq % IB_RING;
	int rc;

	if (comm_error(c) || refuse_after_bye(c))
		return c->error;
	for (int i = 0; i < n; i++)
		if (!in_mr(mhandles[i], data[i], sizes[i])) {
			BRAID_WARN("ib: irecv buffer %d (%zu bytes at %p) is outside its registration",
				   i, sizes[i], data[i]);
			return ncclInvalidArgument;
		}
	if (c->inflight >= IB_RING || c->slot[slot])
		return ncclSuccess;
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess;
	r->comm = c;
	r->kind = IB_REQ_RECV;
	r->n = n;
	r->seq = c->seq;
	r->first = c->nbufs;
	for (int i = 0; i < n; i++) {
		const struct ib_mr *m = mhandles[i];

		r->cap[i] = sizes[i];
		r->fifo[i] = (struct ib_fifo_elem){
			.seq = c->seq + 1,
			.n = (uint16_t)n,
			.idx = (uint16_t)i,
			.addr = (uint64_t)(uintptr_t)data[i],
			.size = sizes[i],
			.tag = tags[i],
			.seq_end = c->seq + 1,
		};
		for (int k = 0; k < c->nrails; k++)
			r->fifo[i].rkey[k] = ib_mr_on(m, k)->rkey;
	}
	rc = ib_qp_post_rdma(c->qps[0].qp, ib_wr_id(r, IB_WR_FIFO), IBV_WR_RDMA_WRITE, r->fifo,
			     (uint32_t)(n * (int)sizeof(r->fifo[0])), c->pool_mr->lkey,
			     c->rem_fifo_addr + (uint64_t)slot * sizeof(r->fifo), c->rem_fifo_rkey);
	if (rc) {
		BRAID_WARN("ib: receive comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): posting "
			   "the FIFO write failed: %s",
			   c->dev->name, c->dev->port, c->qps[0].qp->qp_num, c->qps[0].remote_qpn,
			   c->peer, c->peer_gid, strerror(rc));
		braid_pool_put(&c->reqs, r);
		c->warned = 1;
		comm_fail(c, ncclSystemError);
		return c->error;
	}
	r->pending = n + 1;
	r->posted_ns = braid_now_ns();
	r->magic = BRAID_MAGIC_REQ;
	c->slot[slot] = r;
	c->inflight++;
	c->seq++;
	c->nbufs += (uint64_t)n;
	*request = r;
	return ncclSuccess;
}

/* A buffer of a receive request is complete once all its chunks landed. */
static int buffer_done(const struct ib_req *r, int i)
{
	return r->chunks_want[i] && r->chunks_got[i] == r->chunks_want[i];
}

/* A request still waiting: can it still complete? The comm's error, or the request's. */
static ncclResult_t check_request(struct ib_comm *c, struct ib_req *r)
{
	uint64_t bufs[BRAID_MAX_RECVS];
	char who[128];
	int n = 0;

	braid_ctr_note_stall(c->dev->ctr, r->posted_ns, &r->stalled);
	check_health(c);
	comm_error(c);
	if (c->error != ncclSuccess)
		return c->error;
	if (r->status != ncclSuccess || c->link->state != BRAID_LINK_BYE || r->kind == IB_REQ_FLUSH)
		return r->status;
	if (r->kind == IB_REQ_SEND)
		bufs[n++] = r->first;
	for (int i = 0; r->kind == IB_REQ_RECV && i < r->n; i++)
		if (!buffer_done(r, i))
			bufs[n++] = r->first + (uint64_t)i;
	snprintf(who, sizeof(who), "ib: %s comm %s:%d", side(c), c->dev->name, c->dev->port);
	if (braid_link_judge(c->link, bufs, n, r->kind == IB_REQ_SEND, who))
		req_fail(r, ncclRemoteError);
	return r->status;
}

void ib_comm_bye(struct ib_comm *c, struct braid_link_bye *bye)
{
	if (!c->error)
		progress(c);
	if (c->is_send) {
		/* a group with buffers used is the current one: its slot stays ours */
		uint32_t gn = c->used ? c->fifo[c->seq % IB_RING][0].n : 0;

		braid_bye_init(bye, c->sent_upto, c->sent_upto + gn);
		for (uint32_t i = 0; i < gn; i++)
			if (c->used & (1u << i))
				braid_bye_add(bye, c->sent_upto + i);
		return;
	}
	/* receiver: every buffer is filled but those of requests still waiting */
	uint64_t base = c->nbufs;

	for (int s = 0; s < IB_RING; s++)
		for (int i = 0; c->slot[s] && i < c->slot[s]->n; i++)
			if (!buffer_done(c->slot[s], i) && c->slot[s]->first + (uint64_t)i < base)
				base = c->slot[s]->first + (uint64_t)i;
	braid_bye_init(bye, base, c->nbufs);
	for (uint64_t b = base; b < c->nbufs; b++)
		braid_bye_add(bye, b);
	for (int s = 0; s < IB_RING; s++)
		for (int i = 0; c->slot[s] && i < c->slot[s]->n; i++)
			if (!buffer_done(c->slot[s], i))
				braid_bye_del(bye, c->slot[s]->first + (uint64_t)i);
}

ncclResult_t ib_test(void *request, int *done, size_t *sizes, int *nsizes)
{
	struct ib_req *r = to_ib_req(request);
	struct ib_comm *c = r->comm;
	ncclResult_t status;

	*done = 0;
	if (r->pending > 0) {
		progress(c);
		/* cppcheck-suppress knownConditionTrueFalse ; progress() completes r */
		if (r->pending > 0)
			return check_request(c, r); /* it waits, or it never completes */
	}
	status = r->status;
	*done = 1;
	for (int i = 0; r->kind != IB_REQ_FLUSH && i < r->n; i++)
		sizes[i] = r->size[i];
	*nsizes = r->kind == IB_REQ_FLUSH ? 0 : r->n;
	if (r->kind != IB_REQ_FLUSH) {
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(completions), 1);
		c->inflight--;
	}
	if (r->kind == IB_REQ_RECV)
		c->slot[r->seq % IB_RING] = NULL;
	r->magic = BRAID_MAGIC_DEAD;
	braid_pool_put(&c->reqs, r);
	if (status != ncclSuccess)
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
	return status;
}
