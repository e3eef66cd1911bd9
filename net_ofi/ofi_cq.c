// SPDX-License-Identifier: Apache-2.0
/*
 * A device's shared CQ: completions for whichever lane posted the operation, and the
 * announcements that land in the device's shared buffers; progress (the CQ, then every
 * lane's backlog, then the announcement buffers); cancelling a closing lane's operations,
 * or those on memory NCCL deregisters under them (ncclCommAbort).
 * Every function here runs under the device's ep_lock, and writes only lane state and
 * requests' per-lane state (ofi.h, Locking).
 */
#include <sched.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "plugin/clock.h"
#include "plugin/log.h"

#define CQ_BATCH 16

/* Receiver: the sender's weights, for the cut of the buffers posted from now on (ofi.h).
 * Only lane 0 of a fused receive comm takes them. */
static void weights_arrived(struct ofi_lane *l, const struct ofi_announce *m, size_t len)
{
	struct ofi_comm *c = l->comm;

	if (c->is_send || l->k != 0 || c->nlanes < 2 || len != ofi_announce_len(0) || m->n ||
	    !braid_stripe_wire_valid(m->first, c->nlanes)) {
		if (l->error == ncclSuccess)
			BRAID_WARN("ofi: %s comm lane %u on %s peer %s: protocol error: a weight "
				   "message (%zu bytes, weights %#llx) for a comm of %d NIC(s)",
				   ofi_comm_kind(c), l->id, l->dev->name, c->peer, len,
				   (unsigned long long)m->first, c->nlanes);
		ofi_lane_fail(l, ncclRemoteError);
		return;
	}
	if ((int32_t)(m->seq - l->weights_seq) <= 0)
		return; /* overtaken by a newer one: the provider need not keep their order */
	l->weights_seq = m->seq;
	__atomic_store_n(&c->weights_in, m->first, __ATOMIC_RELAXED);
}

/* On a lane some group's parts moved off (ofi_move.c): the lane's own announcement of a
 * moved group, once the NIC is back, is no news; one of a group already sent is such. */
static __attribute__((cold, noinline)) int moved_before(struct ofi_lane *l, uint32_t seq)
{
	const struct ofi_group *g = &l->ring[seq % OFI_MAX_INFLIGHT];

	if ((int32_t)(seq - l->seq) >= 0 &&
	    !(__atomic_load_n(&g->arrived, __ATOMIC_RELAXED) && g->via && g->ann.seq == seq))
		return 0;
	BRAID_INFO(NCCL_NET,
		   "ofi: send comm to %s: lane %u's own announcement of group %u came on %s "
		   "after its parts had moved: dropped",
		   l->comm->peer, l->k, seq, l->dev->name);
	return 1;
}

/* A control message arrived in a shared buffer: an announcement for a send lane, or the
 * sender's weights for a receive lane. */
static void announce_arrived(struct ofi_dev *d, const struct ofi_announce *m, size_t len)
{
	struct ofi_lane *l = len >= ofi_announce_len(0) ? d->by_id[m->dst] : NULL;
	struct ofi_group *g;
	uint32_t lanes;

	if (!l || l->token != m->token || l->closing) {
		/* for a lane that closed (its id may even be someone else's by now) */
		BRAID_TRACE("ofi: device %s: dropped a control message for lane %u", d->name,
			    len >= ofi_announce_len(0) ? m->dst : 0);
		return;
	}
	if (m->kind == OFI_MSG_WEIGHTS) {
		weights_arrived(l, m, len);
		return;
	}
	g = &l->ring[m->seq % OFI_MAX_INFLIGHT];
	lanes = OFI_KIND_LANES(m->kind);
	/* the lanes it names are the comm's, this one among them (0: every lane) */
	if (!l->comm->is_send || OFI_KIND_MSG(m->kind) != OFI_MSG_ANNOUNCE ||
	    (lanes && (lanes >> l->comm->nlanes || !(lanes >> l->k & 1))) || m->kind >> 16) {
		if (l->error == ncclSuccess)
			BRAID_WARN("ofi: %s comm lane %u on %s peer %s: protocol error: a control "
				   "message of kind %#x (%zu bytes)",
				   ofi_comm_kind(l->comm), l->id, d->name, l->comm->peer, m->kind,
				   len);
		ofi_lane_fail(l, ncclRemoteError);
		return;
	}
	if (__atomic_load_n(&g->arrived, __ATOMIC_RELAXED) || m->n < 1 || m->n > BRAID_MAX_RECVS ||
	    len != ofi_announce_len(m->n) || m->seq - l->seq >= OFI_MAX_INFLIGHT) {
		if (l->nmoved && moved_before(l, m->seq))
			return; /* a group moved off this lane: its own announcement after all */
		if (l->error == ncclSuccess)
			BRAID_WARN("ofi: send comm lane %u on %s peer %s: protocol error: "
				   "announcement of group %u (%u buffers, %zu bytes) while at group %u",
				   l->id, d->name, l->comm->peer, m->seq, m->n, len, l->seq);
		ofi_lane_fail(l, ncclRemoteError);
		return;
	}
	g->ann = *m;
	g->used = 0;
	__atomic_store_n(&g->arrived, 1, __ATOMIC_RELEASE);
}

static void slot_unposted(struct ofi_dev *d, struct ofi_op *op)
{
	uint32_t i = (uint32_t)(to_announce_slot(op) - d->ann);

	d->ann_unposted[i / 64] |= 1ULL << (i % 64);
	d->ann_nunposted++;
	d->rx_posted--;
}

static const char *op_name(const struct ofi_op *op)
{
	return op->type == OFI_OP_SEND    ? "a send"
	       : op->type == OFI_OP_RECV  ? "a receive"
	       : op->type == OFI_OP_FLUSH ? "a flush read"
					  : "an announcement";
}

/* One error completion from the shared CQ: it fails the lane of its operation only.
 * -1 when there was none to read after all. */
static int handle_cq_error(struct ofi_dev *d)
{
	struct fi_cq_err_entry e = { 0 };
	struct ofi_req_lane *rl;
	struct ofi_lane *l;
	struct ofi_op *op;
	char buf[256];

	if (fi_cq_readerr(d->cq, &e, 0) != 1)
		return -1;
	if (!e.op_context) {
		BRAID_WARN("ofi: device %s: a completion error for no operation of ours: %s",
			   d->name, ofi_strerror(e.err));
		return 0;
	}
	op = to_ofi_op(e.op_context);
	if (op->type == OFI_OP_ANNOUNCE_RECV) {
		/* cancelled as the endpoint closes; anything else: post it again */
		if (e.err != FI_ECANCELED)
			BRAID_WARN("ofi: device %s: an announcement buffer failed: %s", d->name,
				   ofi_strerror(e.err));
		slot_unposted(d, op);
		return 0;
	}
	l = op->l;
	rl = &op->req->l[op->lane];
	l->outstanding--;
	rl->pending--;
	if (__builtin_expect(l->prof != NULL, 0))
		ofi_prof_done(l, op->req, op);
	if (op->type == OFI_OP_RECV || op->type >= OFI_OP_RECV_MOVING)
		d->rx_posted--;
	if (op->type == OFI_OP_RECV_MOVING) {
		if (e.err == FI_ECANCELED) { /* cancelled to move (ofi_move.c): it goes elsewhere */
			op->type = OFI_OP_RECV_MOVED;
			rl->done_mask |= (uint8_t)(1u << op->idx);
			return 0;
		}
		op->type = OFI_OP_RECV; /* back, failed: the move waits for it no more */
	}
	if (l->closing || (l->mr_dropped && e.err == FI_ECANCELED)) {
		/* Cancelled by the close or by a deregistration, or failing with the
		 * close: expected. */
		if (!rl->failed)
			rl->failed = ncclSystemError;
		BRAID_TRACE("ofi: lane %u on %s closing: completion error %s", l->id, d->name,
			    ofi_strerror(e.err));
		return 0;
	}
	if (!rl->failed)
		rl->failed = e.err == FI_ECANCELED ? ncclSystemError : ncclRemoteError;
	if (op->type == OFI_OP_FLUSH) {
		/* a read of our own memory: its test() judges it (ofi_flush.c), and a NIC the
		 * comm has since left out (failover) fails nothing */
		BRAID_WARN("ofi: receive comm lane %u on %s peer %s: a flush read failed: %s "
			   "(provider: %s)",
			   l->id, d->name, l->comm->peer, ofi_strerror(e.err),
			   fi_cq_strerror(d->cq, e.prov_errno, e.err_data, buf, sizeof(buf)));
		return 0;
	}
	if (l->error != ncclSuccess) {
		/* The first error was reported; the rest are its echo (flushed operations). */
		BRAID_TRACE("ofi: further completion error on %s lane %u: %s", d->name, l->id,
			    ofi_strerror(e.err));
		return 0;
	}
	BRAID_WARN("ofi: %s comm lane %u on %s peer %s: %s failed: %s (provider: %s)",
		   ofi_comm_kind(l->comm), l->id, d->name, l->comm->peer, op_name(op),
		   ofi_strerror(e.err),
		   fi_cq_strerror(d->cq, e.prov_errno, e.err_data, buf, sizeof(buf)));
	ofi_lane_fail(l, ncclRemoteError);
	/* the peer sent past an announced size: it must know, told by the comm's own thread
	 * when the comm fails (ofi_data.c) */
	if (e.err == FI_ETRUNC)
		__atomic_store_n(&l->tell_trunc, 1, __ATOMIC_RELEASE);
	return 0;
}

/* An operation on a part moved between lanes completed (ofi_move.c): a send or receive
 * moved here (its lane's state is op->lane's, whose ep_lock is held; what arrived is its
 * own lane's, read by test() once every lane is complete), or a receive that, being
 * cancelled, had matched after all. */
static __attribute__((cold, noinline)) void moved_completion(struct ofi_dev *d, struct ofi_op *op,
							     size_t len)
{
	struct ofi_req *r = op->req;

	if (op->type == OFI_OP_SEND_MOVED) {
		braid_ctr_count(op->l->ctr, d->ctr, BRAID_CTR(tx_bytes), r->slen[op->from]);
		if (op->counts) /* the message's counting part, wherever it went */
			braid_ctr_count(op->l->ctr, d->ctr, BRAID_CTR(tx_msgs), 1);
		return;
	}
	d->rx_posted--;
	ofi_req_recv(r)->rl[op->from].len[op->idx] = len;
	if (op->type == OFI_OP_RECV_MOVED) {
		/* atomic: check_request reads it without the lock (a verdict's hint) */
		__atomic_store_n(&r->l[op->lane].moved_wait,
				 (uint8_t)(r->l[op->lane].moved_wait & ~(1u << op->idx)),
				 __ATOMIC_RELAXED);
	} else { /* not cancelled: it stays where it is */
		op->type = OFI_OP_RECV;
		r->l[op->lane].done_mask |= (uint8_t)(1u << op->idx);
	}
	braid_ctr_count(op->l->ctr, d->ctr, BRAID_CTR(rx_bytes), len);
	if (op->counts)
		braid_ctr_count(op->l->ctr, d->ctr, BRAID_CTR(rx_msgs), 1);
}

/* A completion from the shared CQ, for whichever lane posted the operation. Messages are
 * counted once, on their first lane that carries a part. */
static void handle_completion(struct ofi_dev *d, const struct fi_cq_tagged_entry *e)
{
	struct ofi_op *op = to_ofi_op(e->op_context);
	struct ofi_lane *l = op->l;
	struct ofi_req *r = op->req;

	if (op->type == OFI_OP_ANNOUNCE_RECV) {
		announce_arrived(d, &to_announce_slot(op)->msg, e->len);
		slot_unposted(d, op);
		return;
	}
	l->outstanding--;
	r->l[op->lane].pending--;
	if (__builtin_expect(l->prof != NULL, 0))
		ofi_prof_done(l, r, op);
	if (op->type == OFI_OP_RECV) {
		d->rx_posted--;
		ofi_req_recv(r)->rl[op->lane].len[op->idx] = e->len;
		r->l[op->lane].done_mask |= (uint8_t)(1u << op->idx);
		braid_ctr_count(l->ctr, d->ctr, BRAID_CTR(rx_bytes), e->len);
		if (op->counts)
			braid_ctr_count(l->ctr, d->ctr, BRAID_CTR(rx_msgs), 1);
	} else if (op->type == OFI_OP_SEND) {
		braid_ctr_count(l->ctr, d->ctr, BRAID_CTR(tx_bytes), r->slen[op->lane]);
		if (op->counts)
			braid_ctr_count(l->ctr, d->ctr, BRAID_CTR(tx_msgs), 1);
	} else if (op->type >= OFI_OP_SEND_MOVED) { /* not an announcement, nor a flush */
		moved_completion(d, op, e->len);
	}
}

static int poll_cq(struct ofi_dev *d)
{
	struct fi_cq_tagged_entry e[CQ_BATCH];
	ssize_t n;

	for (;;) {
		n = fi_cq_read(d->cq, e, CQ_BATCH);
		if (n == -FI_EAVAIL) {
			if (handle_cq_error(d))
				return 0;
			continue;
		}
		if (n <= 0)
			break;
		/* one writer (ep_lock); a waiting sender reads it unlocked (ofi_live.c) */
		__atomic_store_n(&d->completions, d->completions + (uint64_t)n, __ATOMIC_RELAXED);
		for (ssize_t i = 0; i < n; i++)
			handle_completion(d, &e[i]);
		if (n < CQ_BATCH)
			break;
	}
	return n < 0 && n != -FI_EAGAIN ? (int)n : 0;
}

int ofi_dev_lanes_left(const struct ofi_dev *d, const void *arg)
{
	int n = 0;

	(void)arg;
	for (const struct ofi_lane *l = d->lanes; l; l = l->next)
		n += l->outstanding;
	return n;
}

int ofi_dev_reap(struct ofi_dev *d, int (*left)(const struct ofi_dev *d, const void *arg),
		 const void *arg, int yield, int *rc)
{
	uint64_t now = braid_now_ns(), cap = now + OFI_CLOSE_REAP_MAX_MS * 1000000ULL;
	uint64_t until = now + OFI_CLOSE_REAP_MS * 1000000ULL, seen = d->completions;
	int n;

	for (;;) {
		*rc = ofi_dev_progress(d);
		n = left(d, arg);
		now = braid_now_ns();
		if (d->completions != seen) { /* the provider is moving: ours may be next */
			seen = d->completions;
			until = now + OFI_CLOSE_REAP_MS * 1000000ULL;
			if (until > cap)
				until = cap;
		}
		if (!n || *rc || now >= until)
			return n;
		if (yield) {
			pthread_mutex_unlock(&d->ep_lock);
			sched_yield();
			pthread_mutex_lock(&d->ep_lock);
		}
	}
}

int ofi_dev_progress(struct ofi_dev *d)
{
	int rc = poll_cq(d);

	/* Every lane's deferred operations, whichever comm is being called. */
	for (struct ofi_lane **pp = &d->deferred; *pp;) {
		struct ofi_lane *l = *pp;

		if (ofi_post_backlog(l) == -FI_EAGAIN) {
			pp = &l->deferred_next;
			continue;
		}
		*pp = l->deferred_next;
		l->on_deferred = 0;
	}
	if (ofi_post_announce_bufs(d))
		BRAID_WARN("ofi: device %s: posting an announcement buffer failed", d->name);
	return rc;
}

void ofi_lane_undefer(struct ofi_lane *l)
{
	struct ofi_lane **pp;

	if (!l->on_deferred)
		return;
	for (pp = &l->dev->deferred; *pp != l; pp = &(*pp)->deferred_next)
		;
	*pp = l->deferred_next;
	l->on_deferred = 0;
}

/* r's parts moved onto l from other lanes (ofi_move.c), cancelled with l's own. */
static __attribute__((cold, noinline)) void cancel_moved(struct ofi_lane *l, struct ofi_req *r)
{
	struct fid_ep *ep = l->dev->ep;

	for (int k = 0; k < l->comm->nlanes; k++) {
		if (!(r->moved >> k & 1))
			continue;
		if (r->is_send) {
			if (ofi_req_sop(r, k)->l == l)
				fi_cancel(&ep->fid, &ofi_req_sop(r, k)->fictx);
			continue;
		}
		for (int i = 0; i < r->n; i++) {
			struct ofi_op *op = &ofi_req_recv(r)->rl[k].op[i];

			if (op->type == OFI_OP_RECV_MOVED && op->l == l)
				fi_cancel(&ep->fid, &op->fictx);
		}
	}
}

/* fi_cancel what r has posted on l: its own part there, and parts moved onto l. Completed
 * operations are simply not found (-FI_ENOENT); the others complete once, with
 * FI_ECANCELED, and the caller reaps them. */
static void req_cancel_on(struct ofi_lane *l, struct ofi_req *r)
{
	struct fid_ep *ep = l->dev->ep;
	int posted = r->l[l->k].posted;

	if (r->is_send && posted)
		fi_cancel(&ep->fid, &ofi_req_sop(r, l->k)->fictx);
	for (int p = 0; !r->is_send && p < posted; p++)
		fi_cancel(&ep->fid, &ofi_req_recv(r)->rl[l->k].op[p].fictx);
	if (r->moved)
		cancel_moved(l, r);
}

void ofi_lane_cancel(struct ofi_lane *l)
{
	const struct braid_pool *reqs = &l->comm->reqs;

	ofi_lane_undefer(l);
	for (uint32_t i = 0; i < reqs->nelem; i++)
		if (braid_pool_is_used(reqs, i))
			req_cancel_on(l, braid_pool_at(reqs, i));
}

/* Whether r has an operation on m's memory: a send from it, a receive into it. */
static int req_uses_mr(struct ofi_req *r, const struct ofi_mr *m)
{
	if (r->is_send)
		return r->smr == m;
	for (int i = 0; i < r->n; i++)
		if (ofi_req_recv(r)->mr[i] == m)
			return 1;
	return 0;
}

struct mr_drop {
	struct ofi_lane *l;
	const struct ofi_mr *m;
};

/* A left() for ofi_dev_reap: l's operations still outstanding on m's memory. */
static int mr_ops_left(const struct ofi_dev *d, const void *arg)
{
	const struct mr_drop *a = arg;
	const struct braid_pool *reqs = &a->l->comm->reqs;
	int n = 0;

	(void)d;
	for (uint32_t i = 0; i < reqs->nelem; i++) {
		struct ofi_req *r = braid_pool_at(reqs, i);

		if (braid_pool_is_used(reqs, i) && req_uses_mr(r, a->m))
			n += r->l[a->l->k].pending;
	}
	return n;
}

void ofi_lane_backlog_drop(struct ofi_lane *l, const struct ofi_req *r)
{
	uint32_t to = l->backlog_head;

	for (uint32_t i = l->backlog_head; i != l->backlog_tail; i++) {
		struct ofi_req *b = l->backlog[i % OFI_BACKLOG];

		if (b != r)
			l->backlog[to++ % OFI_BACKLOG] = b;
	}
	l->backlog_tail = to;
	if (l->unreach_req == r) /* its wait is over; the pool may hand r out again */
		l->unreach_req = NULL;
	if (!ofi_lane_backlogged(l))
		ofi_lane_undefer(l);
}

/* Posting r failed on a lane after others had taken their part (ofi_data.c): no
 * progress may post it from a backlog once it is back in the pool; what a lane has with
 * the provider keeps it in use until the comm closes, where it is cancelled and reaped. */
int ofi_req_unpost(struct ofi_comm *c, struct ofi_req *r)
{
	int held = 0;

	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];

		pthread_mutex_lock(&l->dev->ep_lock);
		ofi_lane_backlog_drop(l, r);
		held |= r->l[k].pending > 0;
		pthread_mutex_unlock(&l->dev->ep_lock);
	}
	return held;
}

int ofi_lane_drop_mr(struct ofi_lane *l, const struct ofi_mr *m)
{
	const struct braid_pool *reqs = &l->comm->reqs;
	struct mr_drop a = { l, m };
	int found = 0, left, rc;

	for (uint32_t i = 0; i < reqs->nelem; i++) {
		struct ofi_req *r = braid_pool_at(reqs, i);

		if (!braid_pool_is_used(reqs, i) || !req_uses_mr(r, m))
			continue;
		found = 1;
		ofi_lane_backlog_drop(l, r);
		req_cancel_on(l, r);
		if (!r->l[l->k].failed)
			r->l[l->k].failed = ncclSystemError;
	}
	if (!found)
		return 0;
	l->mr_dropped = 1;
	/* Once operations on the lane outlived a reap (a dead NIC, a send the provider cannot
	 * cancel), the next deregMr does not wait for them again: NCCL deregisters every
	 * buffer of the comm in turn, and a comm on a dead NIC would wait each time (close
	 * waits once more) */
	if (l->drop_stuck) {
		ofi_dev_progress(l->dev);
		return mr_ops_left(l->dev, &a);
	}
	left = ofi_dev_reap(l->dev, mr_ops_left, &a, 1, &rc);
	l->drop_stuck = left > 0;
	return left;
}
