// SPDX-License-Identifier: Apache-2.0
/*
 * isend / irecv / test over tagged messages on the device's shared endpoint (protocol and
 * locking in ofi.h). Each entry holds the device's ep_lock throughout, since reading the
 * shared CQ completes other comms' requests too. No allocation and no system call under
 * it beyond libfabric's own: requests come from the comm's pool, and the peer check (one
 * poll() on the link) runs at most every BRAID_LIVENESS_MS.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "plugin/clock.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define CQ_BATCH 16

static char zero_byte; /* buffer for zero-length messages (some providers want non-NULL) */

static const char *comm_kind(const struct ofi_comm *c)
{
	return c->is_send ? "send" : "receive";
}

/* The first failure of a comm is sticky: every later call reports it. */
static void comm_fail(struct ofi_comm *c, ncclResult_t why)
{
	if (c->error == ncclSuccess)
		c->error = why;
	/* A comm still in set-up has no counters yet. */
	if (c->ctr)
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
}

static void req_fail(struct ofi_req *r, ncclResult_t why)
{
	if (r->status == ncclSuccess)
		r->status = why;
}

/* ---- operations the provider refused for now ---- */

static void defer(struct ofi_comm *c)
{
	if (c->on_deferred)
		return;
	c->on_deferred = 1;
	c->deferred_next = c->dev->deferred;
	c->dev->deferred = c;
}

static void undefer(struct ofi_comm *c)
{
	struct ofi_comm **pp;

	if (!c->on_deferred)
		return;
	for (pp = &c->dev->deferred; *pp != c; pp = &(*pp)->deferred_next)
		;
	*pp = c->deferred_next;
	c->on_deferred = 0;
}

/* A receive's parts: its buffers, then the announcement. */
static int recv_parts(const struct ofi_req *r)
{
	return r->n + 1;
}

/* Post a receive's remaining parts; stops quietly at -FI_EAGAIN. The announcement goes
 * last, so a sender never sends into a buffer that is not posted yet. */
static int post_recv_parts(struct ofi_comm *c, struct ofi_req *r)
{
	struct ofi_dev *d = c->dev;

	while (r->next_part < recv_parts(r)) {
		int i = r->next_part;
		ssize_t rc;

		if (i < r->n) {
			if (d->rx_cap && d->rx_posted >= d->rx_cap)
				return -FI_EAGAIN; /* the provider's queue is full */
			rc = fi_trecv(d->ep, r->size[i] ? r->buf[i] : &zero_byte, r->size[i],
				      r->desc[i], FI_ADDR_UNSPEC, ofi_msg_tag(c->id, r->first + i),
				      0, &r->op[i].fictx);
			if (!rc)
				d->rx_posted++;
		} else {
			size_t len = ofi_announce_len(r->ann.n);

			if (len <= d->inject_size) {
				rc = fi_tinject(d->ep, &r->ann, len, c->peer_addr,
						OFI_TAG_ANNOUNCE);
				if (!rc) {
					r->next_part++; /* no completion will come */
					continue;
				}
			} else {
				rc = fi_tsend(d->ep, &r->ann, len, c->pool_desc, c->peer_addr,
					      OFI_TAG_ANNOUNCE, &r->op[i].fictx);
			}
		}
		if (rc)
			return (int)rc;
		r->pending++;
		r->next_part++;
		c->outstanding++;
	}
	return 0;
}

/* A send the provider refused for now (a lane's: see isend_locked). */
static int post_send(struct ofi_comm *c, struct ofi_req *r)
{
	ssize_t rc;

	if (r->next_part)
		return 0;
	rc = fi_tsend(c->dev->ep, r->size[0] ? r->buf[0] : &zero_byte, r->size[0], r->desc[0],
		      c->peer_addr, ofi_msg_tag(c->peer_id, r->first), &r->op[0].fictx);
	if (rc)
		return (int)rc;
	r->pending++;
	r->next_part = 1;
	c->outstanding++;
	return 0;
}

/* Post c's deferred operations in order; 0 when none is left. */
static int post_backlog(struct ofi_comm *c)
{
	while (c->backlog_head != c->backlog_tail) {
		struct ofi_req *r = c->backlog[c->backlog_head % OFI_BACKLOG];
		int rc = r->is_send ? post_send(c, r) : post_recv_parts(c, r);

		if (rc == -FI_EAGAIN)
			return rc;
		if (rc) {
			BRAID_WARN("ofi: receive comm %u on %s from %s: posting a receive failed: %s",
				   c->id, c->dev->name, c->peer, ofi_strerror(rc));
			comm_fail(c, ncclSystemError);
			c->backlog_head = c->backlog_tail;
			return 0;
		}
		c->backlog_head++;
	}
	return 0;
}

int ofi_post_announce_bufs(struct ofi_dev *d)
{
	if (d->ann_closing)
		return 0;
	for (uint32_t w = 0; w < (d->nann + 63) / 64; w++) {
		while (d->ann_unposted[w]) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(d->ann_unposted[w]);
			struct ofi_announce_slot *slot = &d->ann[i];
			ssize_t rc;

			if (d->rx_cap && d->rx_posted >= d->rx_cap)
				return 0;
			/* One exact tag for every comm's announcements (the comm is in the
			 * message): libfabric 1.17's shm strands an unexpected message that
			 * only a receive with ignore bits would match. */
			rc = fi_trecv(d->ep, &slot->msg, sizeof(slot->msg), d->ann_desc,
				      FI_ADDR_UNSPEC, OFI_TAG_ANNOUNCE, 0, &slot->op.fictx);
			if (rc == -FI_EAGAIN)
				return 0; /* again from the next progress */
			if (rc)
				return (int)rc;
			d->rx_posted++;
			d->ann_unposted[w] &= d->ann_unposted[w] - 1;
		}
	}
	return 0;
}

/* ---- completions ---- */

/* Sender: an announcement arrived in a shared buffer; file it with its comm. */
static void announce_arrived(struct ofi_dev *d, const struct ofi_announce *m, size_t len)
{
	struct ofi_comm *c = len >= ofi_announce_len(0) ? d->by_id[m->dst] : NULL;
	struct ofi_group *g;

	if (!c || c->token != m->token || c->closing) {
		/* for a comm that closed (its id may even be someone else's by now) */
		BRAID_TRACE("ofi: device %s: dropped an announcement for comm %u", d->name,
			    len >= ofi_announce_len(0) ? m->dst : 0);
		return;
	}
	g = &c->ring[m->seq % OFI_MAX_INFLIGHT];
	if (g->arrived || m->n < 1 || m->n > BRAID_MAX_RECVS || len != ofi_announce_len(m->n) ||
	    m->seq - c->seq >= OFI_MAX_INFLIGHT) {
		if (c->error == ncclSuccess)
			BRAID_WARN("ofi: send comm %u on %s peer %s: protocol error: announcement "
				   "of group %u (%u buffers, %zu bytes) while at group %u",
				   c->id, d->name, c->peer, m->seq, m->n, len, c->seq);
		comm_fail(c, ncclRemoteError);
		return;
	}
	g->ann = *m;
	g->used = 0;
	g->arrived = 1;
}

static void slot_unposted(struct ofi_dev *d, const struct ofi_op *op)
{
	uint32_t i = (uint32_t)((const struct ofi_announce_slot *)op - d->ann);

	d->ann_unposted[i / 64] |= 1ULL << (i % 64);
	d->rx_posted--;
}

/* One error completion from the shared CQ: it fails the comm of its operation only.
 * -1 when there was none to read after all. */
static int handle_cq_error(struct ofi_dev *d)
{
	struct fi_cq_err_entry e = { 0 };
	struct ofi_comm *c;
	struct ofi_op *op;
	struct ofi_req *r;
	char buf[256];

	if (fi_cq_readerr(d->cq, &e, 0) != 1)
		return -1;
	op = e.op_context;
	if (!op) {
		BRAID_WARN("ofi: device %s: a completion error for no operation of ours: %s",
			   d->name, ofi_strerror(e.err));
		return 0;
	}
	if (op->type == OFI_OP_ANNOUNCE_RECV) {
		/* cancelled as the endpoint closes; anything else: post it again */
		if (e.err != FI_ECANCELED)
			BRAID_WARN("ofi: device %s: an announcement buffer failed: %s", d->name,
				   ofi_strerror(e.err));
		slot_unposted(d, op);
		return 0;
	}
	c = op->comm;
	r = op->req;
	c->outstanding--;
	r->pending--;
	if (op->type == OFI_OP_RECV)
		d->rx_posted--;
	if (c->closing) {
		/* Cancelled by the close, or failing with it: expected. */
		req_fail(r, ncclSystemError);
		BRAID_TRACE("ofi: comm %u on %s closing: completion error %s", c->id, d->name,
			    ofi_strerror(e.err));
		return 0;
	}
	req_fail(r, e.err == FI_ECANCELED ? ncclSystemError : ncclRemoteError);
	if (c->error != ncclSuccess) {
		/* The first error was reported; the rest are its echo (flushed operations). */
		BRAID_TRACE("ofi: further completion error on %s comm %u: %s", d->name, c->id,
			    ofi_strerror(e.err));
		return 0;
	}
	BRAID_WARN("ofi: %s comm %u on %s peer %s: %s failed: %s (provider: %s)", comm_kind(c),
		   c->id, d->name, c->peer,
		   op->type == OFI_OP_SEND   ? "a send"
		   : op->type == OFI_OP_RECV ? "a receive"
					     : "an announcement",
		   ofi_strerror(e.err),
		   fi_cq_strerror(d->cq, e.prov_errno, e.err_data, buf, sizeof(buf)));
	comm_fail(c, ncclRemoteError);
	if (e.err == FI_ETRUNC) /* the peer sent past an announced size: it must know */
		braid_link_report_error(c->link, ncclRemoteError,
					"a message larger than the receive buffer it was sent to");
	return 0;
}

/* A completion from the shared CQ, for whichever comm posted the operation. */
static void handle_completion(struct ofi_dev *d, const struct fi_cq_tagged_entry *e)
{
	struct ofi_op *op = e->op_context;
	struct ofi_comm *c = op->comm;
	struct ofi_req *r = op->req;

	if (op->type == OFI_OP_ANNOUNCE_RECV) {
		announce_arrived(d, &((struct ofi_announce_slot *)op)->msg, e->len);
		slot_unposted(d, op);
		return;
	}
	c->outstanding--;
	r->pending--;
	if (op->type == OFI_OP_RECV) {
		d->rx_posted--;
		r->size[op->idx] = e->len;
		r->done_mask |= (uint8_t)(1u << op->idx);
		braid_ctr_count(c->ctr, d->ctr, BRAID_CTR(rx_bytes), e->len);
		braid_ctr_count(c->ctr, d->ctr, BRAID_CTR(rx_msgs), 1);
	} else if (op->type == OFI_OP_SEND) {
		braid_ctr_count(c->ctr, d->ctr, BRAID_CTR(tx_bytes), r->size[0]);
		braid_ctr_count(c->ctr, d->ctr, BRAID_CTR(tx_msgs), 1);
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
		for (ssize_t i = 0; i < n; i++)
			handle_completion(d, &e[i]);
		if (n < CQ_BATCH)
			break;
	}
	return n < 0 && n != -FI_EAGAIN ? (int)n : 0;
}

int ofi_dev_progress(struct ofi_dev *d)
{
	int rc = poll_cq(d);

	/* Every comm's deferred receives, whichever comm is being called. */
	for (struct ofi_comm **pp = &d->deferred; *pp;) {
		struct ofi_comm *c = *pp;

		if (post_backlog(c) == -FI_EAGAIN) {
			pp = &c->deferred_next;
			continue;
		}
		*pp = c->deferred_next;
		c->on_deferred = 0;
	}
	if (ofi_post_announce_bufs(d))
		BRAID_WARN("ofi: device %s: posting an announcement buffer failed", d->name);
	return rc;
}

/* Read the CQ for c: a failure of the CQ fails c. */
static void progress(struct ofi_comm *c)
{
	int rc = ofi_dev_progress(c->dev);

	if (rc) {
		BRAID_WARN("ofi: fi_cq_read on %s (%s comm %u, peer %s): %s", c->dev->name,
			   comm_kind(c), c->id, c->peer, ofi_strerror(rc));
		comm_fail(c, ncclSystemError);
	}
}

void ofi_comm_cancel(struct ofi_comm *c)
{
	struct fid_ep *ep = c->dev->ep;

	undefer(c);
	/* Completed operations are simply not found (-FI_ENOENT); the others complete once,
	 * with FI_ECANCELED, and the caller reaps them. */
	for (uint32_t i = 0; i < c->reqs.nelem; i++) {
		struct ofi_req *r = braid_pool_at(&c->reqs, i);
		int posted;

		if (!braid_pool_is_used(&c->reqs, i))
			continue;
		posted = r->is_send ? 1 : r->next_part;
		for (int p = 0; p < posted; p++)
			fi_cancel(&ep->fid, &r->op[p].fictx);
	}
}

void ofi_comm_bye(struct ofi_comm *c, struct braid_link_bye *bye)
{
	if (c->is_send) {
		const struct ofi_group *g = &c->ring[c->seq % OFI_MAX_INFLIGHT];

		/* every buffer below sent_upto was sent to, and those of the current group
		 * that are marked used */
		braid_bye_init(bye, c->sent_upto,
			       g->arrived ? g->ann.first + g->ann.n : c->sent_upto);
		for (uint32_t i = 0; g->arrived && i < g->ann.n; i++)
			if (g->used & (1u << i))
				braid_bye_add(bye, g->ann.first + i);
		return;
	}
	/* receiver: every buffer is filled but those of requests still waiting */
	uint64_t base = c->nbufs;

	for (uint32_t i = 0; i < c->reqs.nelem; i++) {
		const struct ofi_req *r = braid_pool_at(&c->reqs, i);

		for (int k = 0; braid_pool_is_used(&c->reqs, i) && k < r->n; k++)
			if (!(r->done_mask & (1u << k)) && r->first + (uint64_t)k < base)
				base = r->first + (uint64_t)k;
	}
	braid_bye_init(bye, base, c->nbufs);
	for (uint64_t b = base; b < c->nbufs; b++)
		braid_bye_add(bye, b);
	for (uint32_t i = 0; i < c->reqs.nelem; i++) {
		const struct ofi_req *r = braid_pool_at(&c->reqs, i);

		for (int k = 0; braid_pool_is_used(&c->reqs, i) && k < r->n; k++)
			if (!(r->done_mask & (1u << k)))
				braid_bye_del(bye, r->first + (uint64_t)k);
	}
}

/* ---- the peer ---- */

/*
 * Look at the link, now and then: a peer that died hung up without a goodbye; a peer
 * whose comm failed in a way we cannot see said so; a peer that closed its comm said
 * goodbye, and that fails nothing by itself (requests decide, in check_request()).
 */
static void check_peer(struct ofi_comm *c, int now)
{
	enum braid_link_state was = c->link->state, st;

	if (c->error != ncclSuccess)
		return;
	st = braid_link_check(c->link, now);
	/* A death or failure fails every comm on the link (the lanes of a fused comm share
	 * one, and another lane may have seen it first); a goodbye is said once. */
	if (st == was && st != BRAID_LINK_DEAD && st != BRAID_LINK_FAILED)
		return;
	switch (st) {
	case BRAID_LINK_DEAD:
		BRAID_WARN("ofi: %s comm %u on %s: peer %s hung up without closing its comm "
			   "(process exited or killed?) with %d request(s) in flight",
			   comm_kind(c), c->id, c->dev->name, c->peer, c->inflight);
		/* shm completes an endpoint's sends in order: one to the dead peer blocks all
		 * later ones, to live peers too (docs/reliability.md, "Kills at every step") */
		if (c->is_send && c->inflight &&
		    !strcmp(c->dev->info->fabric_attr->prov_name, "shm"))
			BRAID_WARN("ofi: libfabric shm on %s: sends still in flight to dead peer "
				   "%s may keep this device's later sends, to every peer, from "
				   "completing; watch `braid stat` stalls",
				   c->dev->name, c->peer);
		comm_fail(c, ncclRemoteError);
		break;
	case BRAID_LINK_FAILED:
		BRAID_WARN("ofi: %s comm %u on %s: peer %s reports: %s", comm_kind(c), c->id,
			   c->dev->name, c->peer, c->link->peer_why);
		comm_fail(c, c->link->peer_code == ncclInvalidUsage ? ncclInvalidUsage
								    : ncclRemoteError);
		break;
	case BRAID_LINK_BYE:
		BRAID_INFO(NCCL_NET,
			   "ofi: %s comm %u on %s: peer %s closed its comm, %d "
			   "request(s) in flight here",
			   comm_kind(c), c->id, c->dev->name, c->peer, c->inflight);
		break;
	default: break;
	}
}

/* After the peer's goodbye no new request of this comm can ever complete. */
static ncclResult_t refuse_after_bye(struct ofi_comm *c)
{
	if (c->link->state != BRAID_LINK_BYE)
		return ncclSuccess;
	BRAID_WARN("ofi: %s comm %u on %s: peer %s closed its comm; no %s can complete any "
		   "more",
		   comm_kind(c), c->id, c->dev->name, c->peer, c->is_send ? "send" : "receive");
	comm_fail(c, ncclRemoteError);
	return c->error;
}

/* A request still waiting: can it still complete? The comm's error, or the request's. */
static ncclResult_t check_request(struct ofi_comm *c, struct ofi_req *r)
{
	uint64_t bufs[BRAID_MAX_RECVS];
	char who[128];
	int n = 0;

	braid_ctr_note_stall(c->dev->ctr, r->posted_ns, &r->stalled);
	check_peer(c, 0);
	if (c->error != ncclSuccess)
		return c->error;
	if (r->status != ncclSuccess || c->link->state != BRAID_LINK_BYE)
		return r->status;
	if (r->is_send)
		bufs[n++] = r->first;
	for (int i = 0; !r->is_send && i < r->n; i++)
		if (!(r->done_mask & (1u << i)))
			bufs[n++] = r->first + (uint64_t)i;
	snprintf(who, sizeof(who), "ofi: %s comm %u on %s", comm_kind(c), c->id, c->dev->name);
	if (braid_link_judge(c->link, bufs, n, r->is_send, who))
		req_fail(r, ncclRemoteError);
	return r->status;
}

/* ---- isend / irecv / test ---- */

static struct ofi_mr *mr_of(void *mhandle)
{
	return mhandle;
}

/* Sender: the current group's announcement, once it came (NULL: not yet). */
static struct ofi_group *current_group(struct ofi_comm *c)
{
	struct ofi_group *g = &c->ring[c->seq % OFI_MAX_INFLIGHT];

	if (!g->arrived)
		progress(c);
	return g->arrived ? g : NULL;
}

static ncclResult_t isend_locked(struct ofi_comm *c, void *data, size_t size, int tag,
				 struct ofi_mr *m, void **request)
{
	struct ofi_group *g;
	struct ofi_req *r;
	uint64_t buf;
	ssize_t rc;
	int idx = -1;

	check_peer(c, 0);
	if (c->error != ncclSuccess || refuse_after_bye(c))
		return c->error;
	g = current_group(c);
	if (!g)
		return c->error; /* the receiver has not posted yet: NCCL calls again */
	for (uint32_t i = 0; i < g->ann.n && idx < 0; i++)
		if (g->ann.e[i].tag == tag && !(g->used & (1u << i)))
			idx = (int)i;
	if (idx < 0)
		return ncclSuccess; /* no free buffer with this tag yet: NCCL calls again */
	/* As NCCL's IB transport: a message larger than its buffer arrives truncated. */
	if (size > g->ann.e[idx].size)
		size = g->ann.e[idx].size;
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess; /* more than maxRecvs x 32 in flight: NCCL retries */
	buf = g->ann.first + (uint64_t)idx;
	r->comm = c;
	r->is_send = 1;
	r->n = 1;
	r->first = buf;
	r->size[0] = size;
	r->buf[0] = data;
	r->desc[0] = m->desc;
	r->op[0] = (struct ofi_op){ .type = OFI_OP_SEND, .req = r, .comm = c };
	/* A lane of a fused comm never answers "not now" once the buffer is announced: the
	 * fused send is already committed on other lanes, so the send waits in the backlog
	 * and any progress of the device posts it (as a deferred receive). */
	rc = c->backlog_head == c->backlog_tail ? post_send(c, r) : -FI_EAGAIN;
	if (rc == -FI_EAGAIN && !c->lane) {
		braid_pool_put(&c->reqs, r);
		progress(c);
		return c->error; /* not taken: NCCL calls again */
	}
	if (rc == -FI_EAGAIN) {
		c->backlog[c->backlog_tail++ % OFI_BACKLOG] = r;
		defer(c);
		rc = 0;
	}
	if (rc) {
		BRAID_WARN("ofi: fi_tsend of %zu bytes on %s comm %u to %s: %s", size, c->dev->name,
			   c->id, c->peer, ofi_strerror((int)rc));
		braid_pool_put(&c->reqs, r);
		comm_fail(c, ncclSystemError);
		return c->error;
	}
	g->used |= 1u << idx;
	if (g->used == (1u << g->ann.n) - 1) {
		g->arrived = 0;
		c->sent_upto = g->ann.first + g->ann.n;
		c->seq++;
	}
	r->posted_ns = braid_now_ns();
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	*request = r;
	return ncclSuccess;
}

void ofi_lane_progress(struct ofi_comm *c)
{
	pthread_mutex_lock(&c->dev->ep_lock);
	progress(c);
	pthread_mutex_unlock(&c->dev->ep_lock);
}

int ofi_send_peek(struct ofi_comm *c, int tag, size_t *size)
{
	struct ofi_group *g;
	int rc = -EAGAIN;

	pthread_mutex_lock(&c->dev->ep_lock);
	check_peer(c, 0);
	if (c->error != ncclSuccess || refuse_after_bye(c)) {
		rc = -(int)c->error;
		goto out;
	}
	g = current_group(c);
	for (uint32_t i = 0; g && i < g->ann.n; i++)
		if (g->ann.e[i].tag == tag && !(g->used & (1u << i))) {
			*size = g->ann.e[i].size;
			rc = 0;
			break;
		}
out:
	pthread_mutex_unlock(&c->dev->ep_lock);
	return rc;
}

ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request)
{
	struct ofi_comm *c = to_ofi_comm(send_comm);
	struct ofi_mr *m = mr_of(mhandle);
	ncclResult_t res;

	if (!braid_mr_range_covers(&m->range, data, size)) {
		BRAID_WARN("ofi: isend of %zu bytes at %p on %s comm %u is outside its registration "
			   "[%#lx, +%zu)",
			   size, data, c->dev->name, c->id, (unsigned long)m->range.base,
			   m->range.len);
		return ncclInvalidArgument;
	}
	pthread_mutex_lock(&c->dev->ep_lock);
	res = isend_locked(c, data, size, tag, m, request);
	pthread_mutex_unlock(&c->dev->ep_lock);
	return res;
}

static ncclResult_t irecv_locked(struct ofi_comm *c, int n, void **data, const size_t *sizes,
				 const int *tags, void **mhandles, void **request)
{
	struct ofi_req *r;
	int rc;

	check_peer(c, 0);
	if (c->error != ncclSuccess || refuse_after_bye(c))
		return c->error;
	if (c->inflight >= OFI_MAX_INFLIGHT)
		return ncclSuccess;
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess;
	r->comm = c;
	r->n = n;
	r->first = c->nbufs;
	r->ann = (struct ofi_announce){ .dst = c->peer_id,
					.n = (uint16_t)n,
					.token = c->peer_token,
					.seq = c->seq,
					.first = c->nbufs };
	for (int i = 0; i < n; i++) {
		r->size[i] = sizes[i];
		r->buf[i] = data[i];
		r->desc[i] = mr_of(mhandles[i])->desc;
		r->op[i] = (struct ofi_op){ .type = OFI_OP_RECV,
					    .idx = (uint8_t)i,
					    .req = r,
					    .comm = c };
		r->ann.e[i].size = sizes[i];
		r->ann.e[i].tag = tags[i];
	}
	r->op[n] = (struct ofi_op){ .type = OFI_OP_ANNOUNCE_SEND, .req = r, .comm = c };
	rc = c->backlog_head == c->backlog_tail ? post_recv_parts(c, r) : -FI_EAGAIN;
	/* a lane of a fused comm keeps step with its other lanes: it queues instead */
	if (rc == -FI_EAGAIN && r->next_part == 0 && c->backlog_head == c->backlog_tail &&
	    !c->lane) {
		/* Nothing taken: let NCCL call again. */
		braid_pool_put(&c->reqs, r);
		progress(c);
		return c->error;
	}
	if (rc && rc != -FI_EAGAIN) {
		/* Posted buffers stay with the provider until the endpoint closes: the comm is done. */
		BRAID_WARN("ofi: irecv of %d buffer(s) on %s comm %u from %s: posting failed: %s",
			   n, c->dev->name, c->id, c->peer, ofi_strerror(rc));
		comm_fail(c, ncclSystemError);
		return c->error;
	}
	if (rc == -FI_EAGAIN) {
		c->backlog[c->backlog_tail++ % OFI_BACKLOG] = r;
		defer(c);
	}
	r->posted_ns = braid_now_ns();
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	c->seq++;
	c->nbufs += (uint64_t)n;
	*request = r;
	return ncclSuccess;
}

ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request)
{
	struct ofi_comm *c = to_ofi_comm(recv_comm);
	ncclResult_t res;

	for (int i = 0; i < n; i++) {
		if (!braid_mr_range_covers(&mr_of(mhandles[i])->range, data[i], sizes[i])) {
			BRAID_WARN("ofi: irecv buffer %d (%zu bytes at %p) on %s comm %u is outside "
				   "its registration",
				   i, sizes[i], data[i], c->dev->name, c->id);
			return ncclInvalidArgument;
		}
	}
	pthread_mutex_lock(&c->dev->ep_lock);
	res = irecv_locked(c, n, data, sizes, tags, mhandles, request);
	pthread_mutex_unlock(&c->dev->ep_lock);
	return res;
}

ncclResult_t ofi_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request)
{
	/* Only host memory is registered by this backend (ptrSupport = HOST): nothing can be
	 * in flight towards a GPU, so there is nothing to flush. */
	(void)recv_comm, (void)n, (void)data, (void)sizes, (void)mhandles;
	*request = NULL;
	return ncclSuccess;
}

/* Every part posted (a deferred receive's may not be yet) and every completion in. */
static int req_complete(const struct ofi_req *r)
{
	return r->pending == 0 && r->next_part == (r->is_send ? 1 : recv_parts(r));
}

static ncclResult_t test_locked(struct ofi_req *r, int *done, size_t *sizes, int *nsizes)
{
	struct ofi_comm *c = r->comm;
	ncclResult_t status;

	*done = 0;
	if (!req_complete(r)) {
		progress(c);
		if (!req_complete(r))
			return check_request(c, r); /* it waits, or it never completes */
	}
	status = r->status;
	*done = 1;
	for (int i = 0; i < r->n; i++)
		sizes[i] = r->size[i];
	*nsizes = r->n;
	braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(completions), 1);
	c->inflight--;
	r->magic = BRAID_MAGIC_DEAD;
	braid_pool_put(&c->reqs, r);
	return status;
}

ncclResult_t ofi_test(void *request, int *done, size_t *sizes, int *nsizes)
{
	struct ofi_req *r = to_ofi_req(request);
	struct ofi_dev *d = r->comm->dev;
	ncclResult_t res;

	pthread_mutex_lock(&d->ep_lock);
	res = test_locked(r, done, sizes, nsizes);
	pthread_mutex_unlock(&d->ep_lock);
	return res;
}
