// SPDX-License-Identifier: Apache-2.0
/*
 * The receiving half of the data path: completions, progress, the comm's health (peer,
 * async events, ports), test() and what a closing comm tells its peer. No allocation, no
 * lock and no system call beyond the verbs ones; the liveness checks run at most every
 * BRAID_LIVENESS_MS while a request waits.
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
#include "plugin/params.h"

#define CQ_BATCH 32
/* QP lanes' samples are folded (and the weights moved) once this many measured
 * completions are in, not after every CQ read: a message sent whole to one QP
 * (ib_post.c) is one completion, and a fold with its reweigh (about 800 instructions
 * over 4 QPs) costs more than the rest of the completion's work. A cut message brings
 * one a QP. 16, not 8: four 1 MiB completions a QP still close each QP's sample (1 MiB
 * at least) once a fold, and the unit test's in-order window still reads 0.92-0.97 of
 * the paths with one at R/4 or R/10 (tests/unit/test_stripe_qps.c). */
#define IB_QREAP_EVERY 16
#define RQ_REPOST_BATCH 16

static void req_fail(struct ib_req *r, ncclResult_t why)
{
	braid_judge_req_fail(&r->status, why);
}

void ib_comm_who(const void *comm, char *buf, size_t len)
{
	const struct ib_comm *c = comm;

	snprintf(buf, len, "ib: %s comm %s:%d", ib_side(c), c->dev->name, c->dev->port);
}

static int qp_index(const struct ib_comm *c, uint32_t qpn)
{
	for (int i = 0; i < c->nqps; i++)
		if (c->qpn[i] == qpn)
			return i;
	return -1;
}

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
	struct ib_req *r = (struct ib_req *)(uintptr_t)(wc->wr_id & ~3ULL);
	char port[96] = "";
	uint64_t down;

	/* a NIC of a fused comm failed: its traffic moves to the others (ib_failover.c) */
	if (c->fo && ib_fo_wc_error(c, wc, qi))
		return;
	/* An adaptive-routing data write (no request: its WRITE_WITH_IMM carries that) only
	 * completes in error; it fails the comm below. */
	if (r && (kind == IB_WR_SEND || kind == IB_WR_FIFO || kind == IB_WR_FLUSH)) {
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
		ib_comm_fail(c, wc_result(wc->status));
		return;
	}
	/* The peer's goodbye leaves before its QPs go (ib_conn.c comm_free): work still
	 * posted to them then fails as the close's echo, not a fault of the fabric (an abort
	 * closes with requests in flight). The goodbye said what can never complete. */
	if (braid_link_check_timed(c->link, 1) == BRAID_LINK_BYE) {
		BRAID_INFO(NCCL_NET,
			   "ib: %s comm %s:%d QP %#x: completion error after peer %s closed its "
			   "comm: %s",
			   ib_side(c), rail_of(c, qi)->dev->name, rail_of(c, qi)->dev->port,
			   wc->qp_num, c->peer, ibv.wc_status_str(wc->status));
		c->warned = 1;
		ib_comm_fail(c, ncclRemoteError);
		return;
	}
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		/* A flush is an echo: the cause may be an async event (e.g. an access error
		 * this side served). Name that instead, when there is one. */
		ib_async_poll(c->hca);
		if (__atomic_load_n(&c->async_error, __ATOMIC_ACQUIRE)) {
			c->next_liveness_ns = 0;
			ib_check_health(c);
			return;
		}
	}
	c->warned = 1;
	ib_async_poll(rail_of(c, qi)->hca); /* a port that went down says so now */
	down = __atomic_load_n(&rail_of(c, qi)->dev->down_ns, __ATOMIC_ACQUIRE);
	if (down)
		snprintf(port, sizeof(port), "; port %d is down (IBV_EVENT_PORT_ERR %.1f s ago)",
			 rail_of(c, qi)->dev->port, (double)(braid_now_ns() - down) / 1e9);
	BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): %s completion "
		   "error: %s (status %d, vendor error %#x)%s",
		   ib_side(c), rail_of(c, qi)->dev->name, rail_of(c, qi)->dev->port, wc->qp_num,
		   qi >= 0 ? c->qps[qi].remote_qpn : 0, c->peer, c->peer_gid,
		   kind == IB_WR_SEND    ? "data write"
		   : kind == IB_WR_FIFO  ? "FIFO write"
		   : kind == IB_WR_FLUSH ? "flush READ"
					 : "receive",
		   ibv.wc_status_str(wc->status), (int)wc->status, wc->vendor_err, port);
	ib_comm_fail(c, wc_result(wc->status));
}

/* A data chunk landed in one of our buffers over QP qi (the receive's wr_id names it: no
 * search by QP number): len bytes of it (bad: a malformed adaptive-routing chunk). */
static inline __attribute__((always_inline)) void
data_arrived(struct ib_comm *c, const struct ibv_wc *wc, int qi, uint32_t len, int bad)
{
	uint32_t imm = ntohl(wc->imm_data);
	uint32_t seq8 = (imm >> 3) & 0xff;
	int idx = (int)(imm & 7), nch = ib_imm_chunks(imm), chunk = ib_imm_chunk(imm);
	struct ib_req *r = c->slot[seq8 % IB_RING];
	uint16_t bit = (uint16_t)(1u << chunk);

	if ((imm >> 24) != IB_IMM_MAGIC || !r || (r->seq & 0xff) != seq8 || idx >= r->n ||
	    (r->chunks_want[idx] && r->chunks_want[idx] != nch) || chunk >= nch ||
	    (r->chunks_got[idx] & bit) || bad) {
		/* after a failover, a chunk that landed before its NIC failed may come again:
		 * it counts once (ib_failover.c) */
		if (c->fo && !bad && (imm >> 24) == IB_IMM_MAGIC &&
		    (!r || (r->seq & 0xff) != seq8 || (r->chunks_got[idx] & bit))) {
			BRAID_TRACE("ib: receive comm %s:%d: chunk %d of group %u buffer %d again",
				    c->dev->name, c->dev->port, chunk, seq8, idx);
			return;
		}
		if (!c->warned) {
			c->warned = 1;
			BRAID_WARN("ib: receive comm %s:%d QP %#x (peer %s, GID %s): protocol error: "
				   "data for group %u buffer %d (imm %#x) while at group %u",
				   rail_of(c, qi)->dev->name, rail_of(c, qi)->dev->port, wc->qp_num,
				   c->peer, c->peer_gid, seq8, idx, imm, c->seq);
		}
		ib_comm_fail(c, ncclRemoteError);
		return;
	}
	r->chunks_want[idx] = (uint8_t)nch;
	r->chunks_got[idx] |= bit;
	r->size[idx] += len;
	if (c->fo)
		__atomic_store_n(&c->fo_done[(r->seq % IB_RING) * BRAID_MAX_RECVS + (uint32_t)idx],
				 (r->seq & 0xffff) << 16 | r->chunks_got[idx], __ATOMIC_RELEASE);
	if (__builtin_expect(c->prof != NULL, 0))
		ib_prof_recv_chunk(c, r, idx, wc, len);
	if (c->qps[qi].ctr) {
		braid_ctr_add(&c->qps[qi].ctr->rx_bytes, len);
		braid_ctr_add(&c->qps[qi].ctr->rx_msgs, 1);
	}
	if (c->nrails > 1) {
		const struct ib_rail *rl = &c->rails[c->qps[qi].rail];

		braid_ctr_add(&rl->dev->ctr->t.rx_bytes, len);
		if (rl->ctr) {
			braid_ctr_add(&rl->ctr->bytes, len);
			braid_ctr_add(&rl->ctr->chunks, 1);
		}
	}
	if (r->chunks_got[idx] == (1u << nch) - 1) {
		r->pending--;
		ib_ctr_msg_done(c, BRAID_CTR(rx_bytes), BRAID_CTR(rx_msgs), r->size[idx]);
	}
}

/*
 * An adaptive-routing chunk (ib_post.c post_write_ar): what landed is its 4-byte size, in
 * the record of its slot, buffer and number. Out of line, so that it costs nothing when
 * off. A chunk that is no such thing, or whose size overflows its buffer, is malformed.
 */
static __attribute__((noinline)) void ar_data_arrived(struct ib_comm *c, const struct ibv_wc *wc)
{
	uint32_t imm = ntohl(wc->imm_data), seq8 = (imm >> 3) & 0xff, idx = imm & 7, len = 0;
	const struct ib_req *r = c->slot[seq8 % IB_RING];
	int chunk = ib_imm_chunk(imm);
	int bad = !c->ar_recs || chunk >= ib_imm_chunks(imm) || wc->byte_len != sizeof(len) || !r ||
		  idx >= (uint32_t)r->n;

	if (!bad) {
		len = __atomic_load_n(&c->ar_recs[seq8 % IB_RING].len[idx][chunk],
				      __ATOMIC_RELAXED);
		bad = r->size[idx] + len > r->cap[idx];
	}
	data_arrived(c, wc, (int)(wc->wr_id >> 2), len, bad);
}

/*
 * A sender's chunk completed, of a request whose rails or QPs are measured: the QP's part
 * is done (it had one chunk; a marking message's only sets the QP's busy mark), the
 * rail's once all its chunks are. *now: the clock, read once per CQ read (0: not yet).
 */
static void chunk_done(struct ib_comm *c, struct ib_req *r, uint32_t qpn, uint64_t *now)
{
	int qi = qp_index(c, qpn), k;

	if (qi < 0)
		return;
	k = c->qps[qi].rail;
	if (!*now)
		*now = braid_now_ns();
	if ((r->qlanes & r->qmarks) >> k & 1) {
		braid_stripe_marked(&c->qst[k], qi / c->nrails, r->qp_bytes[qi], *now);
	} else if (r->qlanes >> k & 1) {
		braid_stripe_completed(&c->qst[k], qi / c->nrails, r->qp_bytes[qi], *now);
		c->qreap++;
	}
	if (c->nrails > 1 && r->rail_pending[k] && !--r->rail_pending[k]) {
		braid_stripe_completed(&c->stripe, k, r->rail_bytes[k], *now);
		braid_ctr_add(&c->rails[k].dev->ctr->t.tx_bytes, r->rail_bytes[k]);
	}
}

/* After a CQ read that completed QP-measured chunks: their samples, and a QP whose path
 * runs slow is named once (at INFO: an ECMP path, not a NIC, and the weights route
 * around it). */
static __attribute__((noinline)) void qp_lanes_reaped(struct ib_comm *c)
{
	double rate, others;
	int slow;

	c->qreap = 0;
	for (int k = 0; k < c->nrails; k++) {
		if (!(c->qlanes_on >> k & 1))
			continue;
		braid_stripe_reaped(&c->qst[k]);
		slow = braid_stripe_slow_lane(&c->qst[k], &rate, &others);
		if (slow >= 0)
			BRAID_INFO(NCCL_NET,
				   "ib: send comm to %s: QP %#x on %s:%d carries %.0f MB/s, "
				   "under half the %.0f MB/s of its other QPs (a congested ECMP "
				   "path?); it gets a smaller share (BRAID_STRIPE=%s)",
				   c->peer, c->qps[k + slow * c->nrails].qp->qp_num,
				   c->rails[k].dev->name, c->rails[k].dev->port, rate / 1e6,
				   others / 1e6,
				   braid_param_int(BRAID_P_STRIPE) ? "equal" : "adaptive");
	}
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

static void handle_wc(struct ib_comm *c, const struct ibv_wc *wc, uint64_t *now)
{
	struct ib_req *r = (struct ib_req *)(uintptr_t)(wc->wr_id & ~3ULL);

	if (wc->status != IBV_WC_SUCCESS) {
		handle_wc_error(c, wc);
		return;
	}
	switch (wc->wr_id & 3) {
	case IB_WR_SEND:
		if (c->nrails > 1 || r->qlanes)
			chunk_done(c, r, wc->qp_num, now);
		if (__builtin_expect(c->prof != NULL, 0))
			ib_prof_send_done(c, r, wc->qp_num);
		if (--r->pending == 0) {
			if (__builtin_expect(r->fo != IB_FO_NONE, 0)) {
				ib_fo_send_settled(c, r);
			} else if (r->status == ncclSuccess) {
				ib_ctr_msg_done(c, BRAID_CTR(tx_bytes), BRAID_CTR(tx_msgs),
						r->size[0]);
			}
		}
		break;
	case IB_WR_FIFO:
		if (c->is_send) { /* a failover probe (ib_failover.c) */
			ib_fo_probed(c, r);
		} else {
			r->pending--;
			if ((int32_t)(r->seq + 1 - c->fifo_acked) > 0)
				c->fifo_acked = r->seq + 1;
		}
		break;
	case IB_WR_FLUSH:
		if (c->is_send) /* a data QP's: recovery's proof READ (ib_recover.c) */
			ib_rj_wr_back(c, 1);
		else
			r->pending--;
		break;
	case IB_WR_RECV:
		if (++c->qps[wc->wr_id >> 2].rq_reposts == RQ_REPOST_BATCH)
			c->rq_due |= (uint16_t)(1u << (wc->wr_id >> 2));
		if (wc->imm_data & htonl(IB_IMM_AR))
			ar_data_arrived(c, wc);
		else
			data_arrived(c, wc, (int)(wc->wr_id >> 2), wc->byte_len, 0);
		break;
	default: break;
	}
}

/* The receive queues that used up a batch get it back. A QP in error, or one being drained
 * for recovery, keeps its mark and is passed over: recovery posts its receives
 * (ib_recover.c), and one reposted there below the batch loses the mark here. A sound QP
 * of a failed rail still gets them: the sender may write there until its own QP on the
 * rail fails, and a receive queue run dry would hold its writes in RNR retries for ever. */
static __attribute__((noinline)) void repost_recvs(struct ib_comm *c)
{
	for (uint16_t due = c->rq_due; due; due &= (uint16_t)(due - 1)) {
		int i = __builtin_ctz(due), rc;
		struct ib_qp *q = &c->qps[i];

		if (q->rq_reposts < RQ_REPOST_BATCH) {
			c->rq_due &= (uint16_t) ~(1u << i);
			continue;
		}
		if (((c->qp_err | c->rj_draining) >> i) & 1)
			continue;
		rc = ib_qp_post_recvs(c, q, q->rq_reposts);
		q->rq_reposts = 0;
		c->rq_due &= (uint16_t) ~(1u << i);
		if (rc) {
			BRAID_WARN("ib: receive comm %s:%d QP %#x: reposting receives failed: %s",
				   c->rails[q->rail].dev->name, c->rails[q->rail].dev->port,
				   q->qp->qp_num, strerror(-rc));
			ib_comm_fail(c, ncclSystemError);
		}
	}
}

void ib_progress(struct ib_comm *c)
{
	struct ibv_wc wc[CQ_BATCH];
	uint64_t now = 0;
	int n;

	for (int k = 0; k < c->nrails; k++) {
		struct ib_rail *rl = &c->rails[k];

		do {
			n = ibv_poll_cq(rl->cq, CQ_BATCH, wc);
			for (int i = 0; i < n; i++)
				handle_wc(c, &wc[i], &now);
		} while (n == CQ_BATCH);
		if (n < 0) {
			BRAID_WARN("ib: ibv_poll_cq on %s:%d (peer %s) failed", rl->dev->name,
				   rl->dev->port, c->peer);
			ib_comm_fail(c, ncclSystemError);
		}
	}
	if (c->is_send && c->nrails > 1)
		stripe_reaped(c);
	if (c->qreap >= IB_QREAP_EVERY)
		qp_lanes_reaped(c);
	if (c->rq_due && !c->error)
		repost_recvs(c);
}

/* While something waits: is the peer process there, did an async event or a port going
 * down hit this comm? */
void ib_check_health(struct ib_comm *c)
{
	ib_check_health_at(c, braid_now_ns());
}

void ib_check_health_at(struct ib_comm *c, uint64_t now)
{
	int async;

	if (now < c->next_liveness_ns || c->error)
		return;
	c->next_liveness_ns = now + (uint64_t)braid_param_int(BRAID_P_LIVENESS_MS) * 1000000ULL;
	for (int k = 0; k < c->nrails; k++)
		ib_async_poll(c->rails[k].hca);
	if (c->rj && c->is_send && (c->rail_dead || c->rj_rail >= 0))
		ib_rj_tick(c, now);
	async = __atomic_load_n(&c->async_error, __ATOMIC_ACQUIRE);
	if (async) {
		const struct ib_qp *q = &c->qps[c->async_qp];

		BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): %s",
			   ib_side(c), c->rails[q->rail].dev->name, c->rails[q->rail].dev->port,
			   q->qp->qp_num, q->remote_qpn, c->peer, c->peer_gid, c->async_why);
		ib_comm_fail(c, (ncclResult_t)async);
	} else {
		enum braid_link_state was = c->link->state;

		switch (braid_link_check(c->link, 1)) {
		case BRAID_LINK_FAILED:
			BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): the "
				   "peer reports: %s",
				   ib_side(c), c->dev->name, c->dev->port, c->qps[0].qp->qp_num,
				   c->qps[0].remote_qpn, c->peer, c->peer_gid, c->link->peer_why);
			ib_comm_fail(c, c->link->peer_code == ncclInvalidUsage ? ncclInvalidUsage
									       : ncclRemoteError);
			break;
		case BRAID_LINK_DEAD:
			BRAID_WARN("ib: %s comm %s:%d QP %#x -> remote QP %#x (peer %s, GID %s): the "
				   "peer hung up without closing its comm (process exited or "
				   "killed?) with %d request(s) in flight",
				   ib_side(c), c->dev->name, c->dev->port, c->qps[0].qp->qp_num,
				   c->qps[0].remote_qpn, c->peer, c->peer_gid, c->inflight);
			ib_comm_fail(c, ncclRemoteError);
			break;
		case BRAID_LINK_BYE:
			if (was != BRAID_LINK_BYE)
				BRAID_INFO(NCCL_NET,
					   "ib: %s comm %s:%d: peer %s closed its comm, %d "
					   "request(s) in flight here",
					   ib_side(c), c->dev->name, c->dev->port, c->peer,
					   c->inflight);
			break;
		default: break;
		}
	}
	if (c->error)
		c->warned = 1;
}

ncclResult_t ib_comm_async_error(struct ib_comm *c)
{
	c->next_liveness_ns = 0;
	ib_check_health(c);
	return c->error;
}

/* A buffer of a receive request is complete once all its chunks landed. */
static int buffer_done(const struct ib_req *r, int i)
{
	return r->chunks_want[i] && r->chunks_got[i] == (1u << r->chunks_want[i]) - 1;
}

/* A request still waiting: can it still complete? The comm's error, or the request's. Out
 * of line: a test() that finds its request done pays nothing for it. */
static __attribute__((noinline)) ncclResult_t check_request(struct ib_comm *c, struct ib_req *r)
{
	uint64_t bufs[BRAID_MAX_RECVS];
	int n = 0;

	if (braid_tick_due(&r->tick_left)) {
		uint64_t now = braid_now_ns(); /* one clock read for both */

		braid_ctr_note_stall(c->dev->ctr, &r->waiting_ns, now, &r->stalled);
		ib_check_health_at(c, now);
	}
	ib_comm_error(c);
	if (c->error != ncclSuccess)
		return c->error;
	if (r->kind == IB_REQ_FLUSH || !braid_judge_due(c->link, r->status))
		return r->status;
	if (r->kind == IB_REQ_SEND)
		bufs[n++] = r->first;
	for (int i = 0; r->kind == IB_REQ_RECV && i < r->n; i++)
		if (!buffer_done(r, i))
			bufs[n++] = r->first + (uint64_t)i;
	braid_judge_verdict(c->link, &r->status, bufs, n, r->kind == IB_REQ_SEND, ib_comm_who, c);
	return r->status;
}

void ib_comm_bye(struct ib_comm *c, struct braid_link_bye *bye)
{
	struct braid_judge_wait w[IB_RING];
	int nw = 0;

	if (!c->error)
		ib_progress(c);
	if (c->is_send) {
		/* a group with buffers used is the current one: its slot stays ours */
		braid_judge_bye_send(bye, c->sent_upto,
				     c->used ? c->fifo[c->seq % IB_RING][0].n : 0, c->used);
		return;
	}
	for (int s = 0; s < IB_RING; s++) {
		const struct ib_req *r = c->slot[s];

		if (!r)
			continue;
		w[nw] = (struct braid_judge_wait){ .first = r->first, .n = r->n };
		for (int i = 0; i < r->n; i++)
			if (buffer_done(r, i))
				w[nw].done |= 1u << i;
		nw++;
	}
	braid_judge_bye_recv(bye, c->nbufs, w, nw);
}

ncclResult_t ib_test(void *request, int *done, int *sizes)
{
	struct ib_req *r = to_ib_req(request);
	struct ib_comm *c = r->comm;
	ncclResult_t status;

	*done = 0;
	if (r->pending > 0) {
		ib_progress(c);
		/* cppcheck-suppress knownConditionTrueFalse ; progress() completes r */
		if (r->pending > 0)
			return check_request(c, r); /* it waits, or it never completes */
	}
	status = r->status;
	*done = 1;
	/* a receive's events, and a failed send's, stop as NCCL learns it is done */
	if (__builtin_expect(c->prof != NULL, 0) && r->kind != IB_REQ_FLUSH)
		ib_prof_end(c, r, 0);
	if (r->kind != IB_REQ_FLUSH) {
		for (int i = 0; sizes && i < r->n; i++)
			sizes[i] = braid_size_int(r->size[i]);
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(completions), 1);
		c->inflight--;
		if (r->kind == IB_REQ_RECV)
			c->slot[r->seq % IB_RING] = NULL;
	}
	r->magic = BRAID_MAGIC_DEAD;
	braid_pool_put(&c->reqs, r);
	if (status != ncclSuccess)
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
	return status;
}
