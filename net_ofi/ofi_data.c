// SPDX-License-Identifier: Apache-2.0
/*
 * isend / irecv / test over tagged messages (protocol in ofi.h). No allocation, no lock
 * and no system call on this path beyond libfabric's own: requests come from the comm's
 * pool, and the liveness poll() runs at most every BRAID_LIVENESS_MS while a request waits.
 */
#include <errno.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define CQ_BATCH 16

static char zero_byte; /* buffer for zero-length messages (some providers want non-NULL) */

static void comm_fail(struct ofi_comm *c, ncclResult_t why)
{
	if (c->error == ncclSuccess)
		c->error = why;
	braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
}

static void req_fail(struct ofi_req *r, ncclResult_t why)
{
	if (r->status == ncclSuccess)
		r->status = why;
}

static ncclResult_t cq_error_result(int err)
{
	switch (err) {
	case FI_ECANCELED:
		return ncclSystemError;
	case FI_ETRUNC:
		return ncclInvalidUsage;
	default:
		return ncclRemoteError;
	}
}

static void handle_cq_error(struct ofi_comm *c)
{
	struct fi_cq_err_entry e = { 0 };
	struct ofi_op *op;
	char buf[256];
	int rc = (int)fi_cq_readerr(c->cq, &e, 0);

	if (rc < 0)
		return;
	op = e.op_context;
	if (op && op->req)
		req_fail(op->req, cq_error_result(e.err));
	if (op && op->req)
		op->req->pending--;
	if (c->error != ncclSuccess) {
		/* The first error was reported; the rest are its echo (flushed operations). */
		BRAID_TRACE("ofi: further completion error on %s: %s", c->dev->name,
			    ofi_strerror(e.err));
		return;
	}
	BRAID_WARN("ofi: %s comm %s peer %s: completion error on %s: %s (provider: %s)",
		   c->magic == BRAID_MAGIC_SEND ? "send" : "receive", c->dev->name, c->peer,
		   op && op->type == OFI_OP_SEND_DATA   ? "data send"
		   : op && op->type == OFI_OP_RECV_DATA ? "data receive"
							: "control message",
		   ofi_strerror(e.err), fi_cq_strerror(c->cq, e.prov_errno, e.err_data, buf, sizeof(buf)));
	/* A lost control buffer or an unknown failure leaves the protocol unusable. */
	comm_fail(c, cq_error_result(e.err));
}

/* (Re)post the RTR receives; stops quietly at -FI_EAGAIN. */
static int post_ctrl_recvs(struct ofi_comm *c)
{
	while (c->ctrl_unposted) {
		int i = __builtin_ctz(c->ctrl_unposted);
		struct ofi_ctrl_slot *slot = &c->ctrl[i];
		ssize_t rc = fi_trecv(c->ep, &slot->msg, sizeof(slot->msg), c->ctrl_desc,
				      FI_ADDR_UNSPEC, OFI_TAG_CTRL, 0, &slot->op.fictx);

		if (rc == -FI_EAGAIN)
			return 0;
		if (rc)
			return (int)rc;
		c->ctrl_unposted &= ~(1u << i);
	}
	return 0;
}

/* Post a receive request's remaining parts: its buffers, then the RTR that announces them
 * (only once every buffer is posted, so data never arrives unexpected). */
static int post_recv_parts(struct ofi_comm *c, struct ofi_req *r)
{
	while (r->next_part <= r->n) {
		int i = r->next_part;
		ssize_t rc;

		if (i < r->n) {
			size_t len = (size_t)r->rtr.e[i].size;

			rc = fi_trecv(c->ep, len ? r->buf[i] : &zero_byte, len, r->desc[i],
				      FI_ADDR_UNSPEC, ofi_data_tag(r->rtr.seq, i), OFI_TAG_ERR,
				      &r->op[i].fictx);
		} else {
			size_t len = ofi_rtr_len(r->rtr.n);

			if (len <= c->inject_size) {
				rc = fi_tinject(c->ep, &r->rtr, len, c->peer_addr, OFI_TAG_CTRL);
				if (!rc) {
					r->next_part++; /* no completion will come */
					continue;
				}
			} else {
				rc = fi_tsend(c->ep, &r->rtr, len, c->pool_desc, c->peer_addr,
					      OFI_TAG_CTRL, &r->op[i].fictx);
			}
		}
		if (rc == -FI_EAGAIN)
			return -FI_EAGAIN;
		if (rc)
			return (int)rc;
		r->pending++;
		r->next_part++;
	}
	return 0;
}

int ofi_post_deferred(struct ofi_comm *c)
{
	int rc = c->ctrl ? post_ctrl_recvs(c) : 0;

	while (!rc && c->backlog_head != c->backlog_tail) {
		struct ofi_req *r = c->backlog[c->backlog_head % OFI_RING];

		rc = post_recv_parts(c, r);
		if (rc == -FI_EAGAIN)
			return 0;
		if (!rc)
			c->backlog_head++;
	}
	if (rc)
		BRAID_WARN("ofi: %s comm on %s peer %s: posting a deferred operation failed: %s",
			   c->magic == BRAID_MAGIC_SEND ? "send" : "receive", c->dev->name, c->peer,
			   ofi_strerror(rc));
	return rc;
}

/* A sender got an RTR: file it under its group's ring slot. */
static void rtr_arrived(struct ofi_comm *c, struct ofi_ctrl_slot *slot, size_t len)
{
	const struct ofi_rtr *m = &slot->msg;
	struct ofi_group *g = &c->ring[m->seq % OFI_RING];

	if (g->arrived || m->n < 1 || m->n > BRAID_MAX_RECVS || len != ofi_rtr_len(m->n) ||
	    m->seq - c->seq >= OFI_RING) {
		BRAID_WARN("ofi: send comm %s peer %s: protocol error: control message for group %u "
			   "(%u buffers) while at group %u",
			   c->dev->name, c->peer, m->seq, m->n, c->seq);
		comm_fail(c, ncclRemoteError);
	} else {
		g->rtr = *m;
		g->used = 0;
		g->arrived = 1;
	}
	c->ctrl_unposted |= 1u << (slot - c->ctrl);
}

static void handle_completion(struct ofi_comm *c, const struct fi_cq_tagged_entry *e)
{
	struct ofi_op *op = e->op_context;
	struct ofi_req *r = op->req;

	switch (op->type) {
	case OFI_OP_RECV_CTRL:
		rtr_arrived(c, (struct ofi_ctrl_slot *)op, e->len);
		return;
	case OFI_OP_RECV_DATA:
		r->size[op->idx] = e->len;
		if (e->tag & OFI_TAG_ERR) {
			BRAID_WARN("ofi: receive comm %s peer %s: the sender's message is larger than "
				   "receive buffer %d (%zu bytes) of group %u; nothing was written",
				   c->dev->name, c->peer, op->idx, (size_t)r->rtr.e[op->idx].size,
				   r->rtr.seq);
			req_fail(r, ncclInvalidUsage);
			braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
		} else {
			braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(rx_bytes), e->len);
			braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(rx_msgs), 1);
		}
		break;
	case OFI_OP_SEND_DATA:
		if (r->status == ncclSuccess) {
			braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(tx_bytes), r->size[0]);
			braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(tx_msgs), 1);
		}
		break;
	case OFI_OP_SEND_CTRL:
		break;
	}
	r->pending--;
}

static void progress(struct ofi_comm *c)
{
	struct fi_cq_tagged_entry e[CQ_BATCH];
	ssize_t n;

	for (;;) {
		n = fi_cq_read(c->cq, e, CQ_BATCH);
		if (n == -FI_EAVAIL) {
			handle_cq_error(c);
			continue;
		}
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			handle_completion(c, &e[i]);
		if (n < CQ_BATCH)
			break;
	}
	if (n < 0 && n != -FI_EAGAIN && n != -FI_EAVAIL) {
		BRAID_WARN("ofi: fi_cq_read on %s peer %s: %s", c->dev->name, c->peer,
			   ofi_strerror((int)n));
		comm_fail(c, ncclSystemError);
	}
	if ((c->ctrl_unposted || c->backlog_head != c->backlog_tail) && ofi_post_deferred(c))
		comm_fail(c, ncclSystemError);
}

/* While something waits, check now and then that the peer process still exists. */
static void check_peer(struct ofi_comm *c)
{
	uint64_t now = braid_now_ns();

	if (now < c->next_liveness_ns)
		return;
	c->next_liveness_ns = now + (uint64_t)braid_param_int(BRAID_P_LIVENESS_MS) * 1000000ULL;
	if (c->error == ncclSuccess && braid_oob_peer_gone(c->chan.fd)) {
		BRAID_WARN("ofi: %s comm on %s: peer %s closed its connection (process exited or "
			   "killed?) with %d request(s) in flight",
			   c->magic == BRAID_MAGIC_SEND ? "send" : "receive", c->dev->name, c->peer,
			   c->inflight);
		comm_fail(c, ncclRemoteError);
	}
}

static struct ofi_mr *mr_of(void *mhandle)
{
	return mhandle;
}

static int in_mr(const struct ofi_mr *m, const void *data, size_t size)
{
	return braid_mr_range_covers(&m->range, data, size);
}

ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request)
{
	struct ofi_comm *c = send_comm;
	struct ofi_mr *m = mr_of(mhandle);
	struct ofi_group *g = &c->ring[c->seq % OFI_RING];
	struct ofi_req *r;
	ssize_t rc;
	int idx = -1;

	if (c->error)
		return c->error;
	if (!in_mr(m, data, size)) {
		BRAID_WARN("ofi: isend of %zu bytes at %p is outside its registration [%#lx, +%zu)",
			   size, data, (unsigned long)m->range.base, m->range.len);
		return ncclInvalidArgument;
	}
	if (!g->arrived) {
		progress(c);
		if (!g->arrived) {
			check_peer(c);
			return c->error; /* NULL request: the receiver has not posted yet */
		}
	}
	for (uint32_t i = 0; i < g->rtr.n && idx < 0; i++)
		if (g->rtr.e[i].tag == tag && !(g->used & (1u << i)))
			idx = (int)i;
	if (idx < 0) {
		BRAID_WARN("ofi: isend tag %d on %s peer %s matches no free buffer of receive group %u "
			   "(%u buffers)",
			   tag, c->dev->name, c->peer, g->rtr.seq, g->rtr.n);
		return ncclInternalError;
	}
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess; /* more than maxRecvs x 32 in flight: NCCL retries */
	r->comm = c;
	r->is_send = 1;
	r->n = 1;
	r->size[0] = size;
	r->op[0] = (struct ofi_op){ .type = OFI_OP_SEND_DATA, .req = r, .comm = c };

	if (size > g->rtr.e[idx].size) {
		/* Tell the receiver instead of truncating: a zero-byte message flagged ERR. */
		BRAID_WARN("ofi: isend of %zu bytes on %s to %s: receive buffer %d of group %u has "
			   "only %llu bytes",
			   size, c->dev->name, c->peer, idx, g->rtr.seq,
			   (unsigned long long)g->rtr.e[idx].size);
		rc = fi_tsend(c->ep, &zero_byte, 0, NULL, c->peer_addr,
			      ofi_data_tag(g->rtr.seq, idx) | OFI_TAG_ERR, &r->op[0].fictx);
		r->status = ncclInvalidUsage;
	} else {
		rc = fi_tsend(c->ep, size ? data : &zero_byte, size, m->desc, c->peer_addr,
			      ofi_data_tag(g->rtr.seq, idx), &r->op[0].fictx);
	}
	if (rc == -FI_EAGAIN) {
		braid_pool_put(&c->reqs, r);
		progress(c);
		return c->error;
	}
	if (rc) {
		BRAID_WARN("ofi: fi_tsend of %zu bytes on %s to %s: %s", size, c->dev->name, c->peer,
			   ofi_strerror((int)rc));
		braid_pool_put(&c->reqs, r);
		comm_fail(c, ncclSystemError);
		return c->error;
	}
	r->pending = 1;
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	g->used |= 1u << idx;
	if (g->used == (1u << g->rtr.n) - 1) {
		g->arrived = 0;
		c->seq++;
	}
	*request = r;
	return ncclSuccess;
}

ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request)
{
	struct ofi_comm *c = recv_comm;
	struct ofi_req *r;
	int rc;

	if (c->error)
		return c->error;
	for (int i = 0; i < n; i++)
		if (!in_mr(mr_of(mhandles[i]), data[i], sizes[i])) {
			BRAID_WARN("ofi: irecv buffer %d (%zu bytes at %p) is outside its registration",
				   i, sizes[i], data[i]);
			return ncclInvalidArgument;
		}
	if (c->inflight >= OFI_RING)
		return ncclSuccess;
	r = braid_pool_get(&c->reqs);
	if (!r)
		return ncclSuccess;
	r->comm = c;
	r->n = n;
	r->rtr.seq = c->seq;
	r->rtr.n = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		r->rtr.e[i].size = sizes[i];
		r->rtr.e[i].tag = tags[i];
		r->buf[i] = data[i];
		r->desc[i] = mr_of(mhandles[i])->desc;
		r->op[i] = (struct ofi_op){ .type = OFI_OP_RECV_DATA, .idx = (uint8_t)i, .req = r, .comm = c };
	}
	r->op[n] = (struct ofi_op){ .type = OFI_OP_SEND_CTRL, .req = r, .comm = c };
	/* Behind earlier deferred requests, or when the provider pushes back: post later. */
	rc = c->backlog_head == c->backlog_tail ? post_recv_parts(c, r) : -FI_EAGAIN;
	if (rc == -FI_EAGAIN && r->next_part == 0 && c->backlog_head == c->backlog_tail) {
		braid_pool_put(&c->reqs, r);
		progress(c);
		return c->error; /* nothing taken: NCCL calls again */
	}
	if (rc && rc != -FI_EAGAIN) {
		BRAID_WARN("ofi: irecv of %d buffer(s) on %s from %s: posting failed: %s", n,
			   c->dev->name, c->peer, ofi_strerror(rc));
		/* Posted parts stay with the provider until the endpoint closes: the comm is done. */
		comm_fail(c, ncclSystemError);
		return c->error;
	}
	if (rc == -FI_EAGAIN)
		c->backlog[c->backlog_tail++ % OFI_RING] = r;
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	c->seq++;
	*request = r;
	return ncclSuccess;
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

/* Every part posted (a deferred receive has not been, yet) and every completion in. */
static int req_complete(const struct ofi_req *r)
{
	return r->pending == 0 && (r->is_send || r->next_part > r->n);
}

ncclResult_t ofi_test(void *request, int *done, size_t *sizes, int *nsizes)
{
	struct ofi_req *r = request;
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
	if (status != ncclSuccess)
		braid_ctr_count(c->ctr, c->dev->ctr, BRAID_CTR(errors), 1);
	return status;
}
