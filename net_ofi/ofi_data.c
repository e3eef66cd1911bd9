// SPDX-License-Identifier: Apache-2.0
/*
 * isend / irecv / test over tagged messages on the device's shared endpoint (protocol and
 * locking in ofi.h). Each entry holds the device's ep_lock throughout, since reading the
 * shared CQ completes other comms' requests too. No allocation and no system call under
 * it beyond libfabric's own: requests come from the comm's pool, and the peer check (one
 * poll() on the handshake socket) runs at most every BRAID_LIVENESS_MS.
 */
#include <stdio.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define CQ_BATCH 16

static char zero_byte; /* buffer for zero-length messages (some providers want non-NULL) */

static const char *comm_kind(const struct ofi_comm *c)
{
	return c->magic == BRAID_MAGIC_SEND ? "send" : "receive";
}

/* The first failure of a comm is sticky: every later call reports it. */
static void comm_fail(struct ofi_comm *c, ncclResult_t why)
{
	if (c->error == ncclSuccess)
		c->error = why;
	/* A comm still in set-up has no counters yet, but another comm's CQ read may fail
	 * one of its announcement buffers. */
	if (c->ctr)
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
}

static void req_fail(struct ofi_req *r, ncclResult_t why)
{
	if (r->status == ncclSuccess)
		r->status = why;
}

/* The k of the next message with this NCCL tag; NULL when the comm has seen too many tags. */
static uint32_t *tag_counter(struct ofi_comm *c, int tag)
{
	uint32_t h = (uint32_t)tag * 2654435761u;

	for (uint32_t i = 0; i < OFI_TAG_SLOTS; i++) {
		struct ofi_tag_count *e = &c->tags[(h + i) % OFI_TAG_SLOTS];

		if (!e->used) {
			e->used = 1;
			e->tag = tag;
			return &e->next;
		}
		if (e->tag == tag)
			return &e->next;
	}
	BRAID_WARN("ofi: %s comm %u on %s peer %s: more than %d distinct tags on one connection",
		   comm_kind(c), c->id, c->dev->name, c->peer, OFI_TAG_SLOTS);
	return NULL;
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
	c = op->comm;
	r = op->req;
	c->outstanding--;
	if (r)
		r->pending--;
	if (c->closing) {
		/* Cancelled by the close, or failing with it: expected. */
		if (r)
			req_fail(r, ncclSystemError);
		BRAID_TRACE("ofi: comm %u on %s closing: completion error %s", c->id, d->name,
			    ofi_strerror(e.err));
		return 0;
	}
	if (e.err == FI_ETRUNC && r && !r->is_send) {
		char why[200];

		/* The message did not fit: a usage error, on both ends. (Providers disagree on
		 * what len and olen say here, so no size is claimed.) */
		snprintf(why, sizeof(why),
			 "a message larger than receive buffer %d (%zu bytes) arrived; nothing "
			 "beyond the buffer was written", op->idx, r->size[op->idx]);
		BRAID_WARN("ofi: receive comm %u on %s from %s: %s; telling the sender", c->id,
			   d->name, c->peer, why);
		req_fail(r, ncclInvalidUsage);
		comm_fail(c, ncclInvalidUsage);
		braid_oob_send_peer_error(&c->chan, ncclInvalidUsage, why);
		return 0;
	}
	if (r)
		req_fail(r, e.err == FI_ECANCELED ? ncclSystemError : ncclRemoteError);
	if (c->error != ncclSuccess) {
		/* The first error was reported; the rest are its echo (flushed operations). */
		BRAID_TRACE("ofi: further completion error on %s comm %u: %s", d->name, c->id,
			    ofi_strerror(e.err));
		return 0;
	}
	BRAID_WARN("ofi: %s comm %u on %s peer %s: %s failed: %s (provider: %s)", comm_kind(c),
		   c->id, d->name, c->peer, op->type == OFI_OP_SEND ? "a send" : "a receive",
		   ofi_strerror(e.err), fi_cq_strerror(d->cq, e.prov_errno, e.err_data, buf, sizeof(buf)));
	comm_fail(c, ncclRemoteError);
	return 0;
}

/* Sender: an announcement arrived; file it under its group's ring slot. */
static void announce_arrived(struct ofi_comm *c, struct ofi_announce_slot *slot, size_t len)
{
	const struct ofi_announce *m = &slot->msg;
	struct ofi_group *g = &c->ring[m->seq % OFI_MAX_INFLIGHT];

	if (g->arrived || m->n < 1 || m->n > BRAID_MAX_RECVS || len != ofi_announce_len(m->n) ||
	    m->seq - c->seq >= OFI_MAX_INFLIGHT) {
		BRAID_WARN("ofi: send comm %u on %s peer %s: protocol error: announcement of "
			   "group %u (%u buffers, %zu bytes) while at group %u",
			   c->id, c->dev->name, c->peer, m->seq, m->n, len, c->seq);
		comm_fail(c, ncclRemoteError);
	} else {
		g->ann = *m;
		g->used = 0;
		g->arrived = 1;
	}
	c->ann_unposted |= 1u << (slot - c->ann_rx);
}

int ofi_post_announce_bufs(struct ofi_comm *c)
{
	while (c->ann_unposted) {
		int i = __builtin_ctz(c->ann_unposted);
		struct ofi_announce_slot *slot = &c->ann_rx[i];
		ssize_t rc = fi_trecv(c->dev->ep, &slot->msg, sizeof(slot->msg), c->ann_desc,
				      FI_ADDR_UNSPEC, ofi_announce_tag(c->id), 0, &slot->op.fictx);

		if (rc == -FI_EAGAIN)
			return 0; /* again from the next progress() */
		if (rc)
			return (int)rc;
		c->ann_unposted &= ~(1u << i);
		c->outstanding++;
	}
	return 0;
}

/* A completion from the shared CQ, for whichever comm posted the operation. */
static void handle_completion(const struct fi_cq_tagged_entry *e)
{
	struct ofi_op *op = e->op_context;
	struct ofi_comm *c = op->comm;
	struct ofi_req *r = op->req;

	c->outstanding--;
	if (op->type == OFI_OP_ANNOUNCE_RECV) {
		announce_arrived(c, (struct ofi_announce_slot *)op, e->len);
		return;
	}
	if (op->type == OFI_OP_ANNOUNCE_SEND) {
		r->pending--;
		return;
	}
	if (op->type == OFI_OP_RECV) {
		r->size[op->idx] = e->len;
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(rx_bytes), e->len);
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(rx_msgs), 1);
	} else {
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(tx_bytes), r->size[0]);
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(tx_msgs), 1);
	}
	r->pending--;
}

/* A receive's parts: its buffers, then (with size announcements) the announcement. */
static int recv_parts(const struct ofi_comm *c, const struct ofi_req *r)
{
	return r->n + (c->announce ? 1 : 0);
}

/* Post a receive's remaining parts; stops quietly at -FI_EAGAIN. The announcement goes
 * last, so a sender never sends into a buffer that is not posted yet. */
static int post_recv_parts(struct ofi_comm *c, struct ofi_req *r)
{
	while (r->next_part < recv_parts(c, r)) {
		int i = r->next_part;
		ssize_t rc;

		if (i < r->n) {
			rc = fi_trecv(c->dev->ep, r->size[i] ? r->buf[i] : &zero_byte, r->size[i],
				      r->desc[i], FI_ADDR_UNSPEC, r->tag[i], 0, &r->op[i].fictx);
		} else {
			size_t len = ofi_announce_len(r->ann.n);

			if (len <= c->dev->inject_size) {
				rc = fi_tinject(c->dev->ep, &r->ann, len, c->peer_addr,
						ofi_announce_tag(c->peer_id));
				if (!rc) {
					r->next_part++; /* no completion will come */
					continue;
				}
			} else {
				rc = fi_tsend(c->dev->ep, &r->ann, len, c->pool_desc, c->peer_addr,
					      ofi_announce_tag(c->peer_id), &r->op[i].fictx);
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

static void post_backlog(struct ofi_comm *c)
{
	while (c->backlog_head != c->backlog_tail) {
		int rc = post_recv_parts(c, c->backlog[c->backlog_head % OFI_MAX_INFLIGHT]);

		if (rc == -FI_EAGAIN)
			return;
		if (rc) {
			BRAID_WARN("ofi: receive comm %u on %s from %s: posting a receive failed: %s",
				   c->id, c->dev->name, c->peer, ofi_strerror(rc));
			comm_fail(c, ncclSystemError);
			return;
		}
		c->backlog_head++;
	}
}

int ofi_dev_poll(struct ofi_dev *d)
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
			handle_completion(&e[i]);
		if (n < CQ_BATCH)
			break;
	}
	return n < 0 && n != -FI_EAGAIN ? (int)n : 0;
}

/* Read the shared CQ, then post what c deferred. */
static void progress(struct ofi_comm *c)
{
	int rc = ofi_dev_poll(c->dev);

	if (rc) {
		BRAID_WARN("ofi: fi_cq_read on %s (%s comm %u, peer %s): %s", c->dev->name,
			   comm_kind(c), c->id, c->peer, ofi_strerror(rc));
		comm_fail(c, ncclSystemError);
	}
	if (c->backlog_head != c->backlog_tail)
		post_backlog(c);
	if (c->ann_unposted && ofi_post_announce_bufs(c)) {
		BRAID_WARN("ofi: send comm %u on %s peer %s: reposting an announcement buffer failed",
			   c->id, c->dev->name, c->peer);
		comm_fail(c, ncclSystemError);
	}
}

void ofi_comm_cancel(struct ofi_comm *c)
{
	struct fid_ep *ep = c->dev->ep;

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
	for (int i = 0; c->ann_rx && i < OFI_MAX_INFLIGHT; i++)
		if (!(c->ann_unposted & (1u << i)))
			fi_cancel(&ep->fid, &c->ann_rx[i].op.fictx);
}

/*
 * Every call looks, now and then, at the handshake socket: a peer that died closed it, and
 * a peer whose receive failed on our message said so there.
 */
static void check_peer(struct ofi_comm *c)
{
	uint64_t now = braid_now_ns();
	char why[200];
	int code;

	if (now < c->next_liveness_ns || c->error != ncclSuccess)
		return;
	c->next_liveness_ns = now + (uint64_t)braid_param_int(BRAID_P_LIVENESS_MS) * 1000000ULL;
	switch (braid_oob_peer_state(&c->chan, &code, why, sizeof(why))) {
	case BRAID_PEER_ALIVE:
		return;
	case BRAID_PEER_ERROR:
		BRAID_WARN("ofi: %s comm %u on %s: peer %s reports: %s", comm_kind(c), c->id,
			   c->dev->name, c->peer, why);
		comm_fail(c, code == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError);
		return;
	case BRAID_PEER_GONE:
		BRAID_WARN("ofi: %s comm %u on %s: peer %s closed its connection (process exited "
			   "or killed?) with %d request(s) in flight",
			   comm_kind(c), c->id, c->dev->name, c->peer, c->inflight);
		comm_fail(c, ncclRemoteError);
		return;
	}
}

static struct ofi_mr *mr_of(void *mhandle)
{
	return mhandle;
}

/*
 * Size announcements: the buffer this send will land in, once its group is announced
 * (*g NULL: not yet). A message larger than its buffer is not sent: both ends fail.
 */
static ncclResult_t check_announced(struct ofi_comm *c, size_t size, int tag,
				    struct ofi_group **gp, int *idx)
{
	struct ofi_group *g = &c->ring[c->seq % OFI_MAX_INFLIGHT];
	char why[200];

	*gp = NULL;
	if (!g->arrived) {
		progress(c);
		if (!g->arrived)
			return c->error;
	}
	*idx = -1;
	for (uint32_t i = 0; i < g->ann.n && *idx < 0; i++)
		if (g->ann.e[i].tag == tag && !(g->used & (1u << i)))
			*idx = (int)i;
	if (*idx < 0) {
		BRAID_WARN("ofi: isend tag %d on %s comm %u peer %s matches no free buffer of "
			   "receive group %u (%u buffers)",
			   tag, c->dev->name, c->id, c->peer, g->ann.seq, g->ann.n);
		return ncclInternalError;
	}
	if (size > g->ann.e[*idx].size) {
		snprintf(why, sizeof(why),
			 "a message of %zu bytes for receive buffer %d of group %u, which has %llu "
			 "bytes; nothing was sent",
			 size, *idx, g->ann.seq, (unsigned long long)g->ann.e[*idx].size);
		BRAID_WARN("ofi: send comm %u on %s to %s: %s", c->id, c->dev->name, c->peer, why);
		comm_fail(c, ncclInvalidUsage);
		braid_oob_send_peer_error(&c->chan, ncclInvalidUsage, why);
		return c->error;
	}
	*gp = g;
	return ncclSuccess;
}

static ncclResult_t isend_locked(struct ofi_comm *c, void *data, size_t size, int tag,
				struct ofi_mr *m, void **request)
{
	struct ofi_group *g = NULL;
	struct ofi_req *r;
	uint32_t *k;
	ssize_t rc;
	int idx = -1;

	check_peer(c);
	if (c->error)
		return c->error;
	k = tag_counter(c, tag);
	if (!k)
		return ncclInternalError;
	if (c->announce) {
		ncclResult_t res = check_announced(c, size, tag, &g, &idx);

		if (res != ncclSuccess || !g)
			return res; /* an error, or not announced yet: NCCL calls again */
	}
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess; /* more than maxRecvs x 32 in flight: NCCL retries */
	r->comm = c;
	r->is_send = 1;
	r->n = 1;
	r->size[0] = size;
	r->op[0] = (struct ofi_op){ .type = OFI_OP_SEND, .req = r, .comm = c };
	rc = fi_tsend(c->dev->ep, size ? data : &zero_byte, size, m->desc, c->peer_addr,
		      ofi_msg_tag(c->peer_id, *k, tag), &r->op[0].fictx);
	if (rc == -FI_EAGAIN) {
		braid_pool_put(&c->reqs, r);
		progress(c);
		return c->error; /* not taken: NCCL calls again */
	}
	if (rc) {
		BRAID_WARN("ofi: fi_tsend of %zu bytes on %s comm %u to %s: %s", size, c->dev->name,
			   c->id, c->peer, ofi_strerror((int)rc));
		braid_pool_put(&c->reqs, r);
		comm_fail(c, ncclSystemError);
		return c->error;
	}
	(*k)++;
	if (g) {
		g->used |= 1u << idx;
		if (g->used == (1u << g->ann.n) - 1) {
			g->arrived = 0;
			c->seq++;
		}
	}
	r->pending = 1;
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	c->outstanding++;
	*request = r;
	return ncclSuccess;
}

ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request)
{
	struct ofi_comm *c = send_comm;
	struct ofi_mr *m = mr_of(mhandle);
	ncclResult_t res;

	if (!braid_mr_range_covers(&m->range, data, size)) {
		BRAID_WARN("ofi: isend of %zu bytes at %p on %s comm %u is outside its registration "
			   "[%#lx, +%zu)",
			   size, data, c->dev->name, c->id, (unsigned long)m->range.base, m->range.len);
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
	uint32_t *k[BRAID_MAX_RECVS];
	struct ofi_req *r;
	int rc;

	check_peer(c);
	if (c->error)
		return c->error;
	for (int i = 0; i < n; i++) {
		k[i] = tag_counter(c, tags[i]);
		if (!k[i])
			return ncclInternalError;
	}
	if (c->inflight >= OFI_MAX_INFLIGHT)
		return ncclSuccess;
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess;
	r->comm = c;
	r->n = n;
	r->ann.seq = c->seq;
	r->ann.n = (uint32_t)n;
	/* k is assigned now, in NCCL's posting order, whenever the buffers reach the provider. */
	for (int i = 0; i < n; i++) {
		r->size[i] = sizes[i];
		r->buf[i] = data[i];
		r->desc[i] = mr_of(mhandles[i])->desc;
		r->tag[i] = ofi_msg_tag(c->id, (*k[i])++, tags[i]);
		r->op[i] = (struct ofi_op){ .type = OFI_OP_RECV, .idx = (uint8_t)i, .req = r,
					    .comm = c };
		r->ann.e[i].size = sizes[i];
		r->ann.e[i].tag = tags[i];
	}
	r->op[n] = (struct ofi_op){ .type = OFI_OP_ANNOUNCE_SEND, .req = r, .comm = c };
	rc = c->backlog_head == c->backlog_tail ? post_recv_parts(c, r) : -FI_EAGAIN;
	if (rc == -FI_EAGAIN && r->next_part == 0 && c->backlog_head == c->backlog_tail) {
		/* Nothing taken: undo the numbering and let NCCL call again. */
		for (int i = 0; i < n; i++)
			(*k[i])--;
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
	if (rc == -FI_EAGAIN)
		c->backlog[c->backlog_tail++ % OFI_MAX_INFLIGHT] = r;
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	c->seq++;
	*request = r;
	return ncclSuccess;
}

ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request)
{
	struct ofi_comm *c = recv_comm;
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
	return r->pending == 0 && (r->is_send || r->next_part == recv_parts(r->comm, r));
}

static ncclResult_t test_locked(struct ofi_req *r, int *done, size_t *sizes, int *nsizes)
{
	struct ofi_comm *c = r->comm;
	ncclResult_t status;

	*done = 0;
	if (!req_complete(r)) {
		progress(c);
		if (!req_complete(r)) {
			check_peer(c);
			/* A failed comm will never complete this request: report, don't wait. */
			return c->error;
		}
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
	if (status == ncclSuccess)
		check_peer(c);
	return status != ncclSuccess ? status : c->error;
}

ncclResult_t ofi_test(void *request, int *done, size_t *sizes, int *nsizes)
{
	struct ofi_req *r = request;
	struct ofi_dev *d = r->comm->dev;
	ncclResult_t res;

	pthread_mutex_lock(&d->ep_lock);
	res = test_locked(r, done, sizes, nsizes);
	pthread_mutex_unlock(&d->ep_lock);
	return res;
}
