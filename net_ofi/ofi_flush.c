// SPDX-License-Identifier: Apache-2.0
/*
 * iflush. NCCL asks for a flush after a receive the NIC wrote into GPU memory, where the
 * GPU might otherwise read bytes still on their way (ncclTopoNeedFlush: compute capability
 * under 9.0, a GPU that reaches its CPU over C2C with the NIC close by, or
 * NCCL_NET_FORCE_FLUSH=1; not when NCCL flushes through gdrcopy itself). NCCL's IB
 * transport reads one byte of the buffer back over a QP connected to itself: the NIC's
 * read of GPU memory completes only after its earlier writes there (PCIe ordering). net_ofi
 * does the same through the device's own endpoint, an fi_read from its own address (as
 * aws-ofi-nccl does), into the request's sink. As NCCL: one read of the last buffer that
 * received bytes, on every NIC of the comm (which one wrote is not known); not on a NIC
 * the receiver leaves out of new groups (its link is down: nothing more comes through it).
 *
 * Where the provider offers no FI_RMA reads (ofi_dev.c, probe_flush), or EFA would carry
 * the read through its shared memory (ofi_ep.c), the first request to flush GPU memory
 * WARNs, once per process, with the ways to stay safe.
 */
#include "net_ofi/ofi.h"
#include "plugin/log.h"
#include "plugin/params.h"

static void warn_no_flush(const struct ofi_comm *c)
{
	static int warned;

	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	BRAID_WARN("ofi: receive comm from %s: NCCL asked to flush a receive into GPU memory, "
		   "and net_ofi cannot read it back through the NIC here (provider %s: no FI_RMA "
		   "read, or EFA's shared-memory path, which FI_EFA_ENABLE_SHM_TRANSFER=0 turns "
		   "off): the GPU may read bytes the NIC has not finished writing. Set "
		   "NCCL_NET_GDR_LEVEL=LOC to receive "
		   "through host memory, or NCCL_GDRCOPY_ENABLE=1 NCCL_GDRCOPY_FLUSH_ENABLE=1 for "
		   "NCCL's own flush (needs gdrcopy) (said once)",
		   c->peer, ofi.provider);
}

/* The lanes that read m's memory back: where the device flushes that memory, the
 * registration is there, and the lane is in new groups. *unable: the lanes that cannot
 * flush a CUDA buffer they may have written. */
static uint32_t flush_lanes(const struct ofi_comm *c, const struct ofi_mr *m, uint32_t *unable)
{
	uint32_t lanes = 0;

	*unable = 0;
	for (int k = 0; k < c->nlanes && k < m->nlanes; k++) {
		if (c->lanes_out >> k & 1)
			continue;
		const struct ofi_dev *d = c->lane[k].dev;

		if (ofi_flush_due(d, m->range.type) && m->lane[k]->mr)
			lanes |= 1u << k;
		else if (m->range.type == NCCL_PTR_CUDA && (d->flush || d->flush_unable))
			*unable |= 1u << k; /* not where the flush is off on purpose */
	}
	return lanes;
}

static void flush_start(struct ofi_comm *c, struct ofi_req *r, void *data, struct ofi_mr *m,
			uint32_t lanes)
{
	struct ofi_recv_part *recv = ofi_req_recv(r);

	ofi_req_start(r, c, 0, 1);
	r->lanes = 0; /* no part of a message on any lane (ofi_live.c), and how the backlog
		       * tells a flush (ofi_post.c) */
	r->first = 0;
	recv->buf[0] = data;
	recv->size[0] = 1;
	recv->mr[0] = m;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_recv_lane *part = &recv->rl[k];

		part->len[0] = 0;
		part->op[0] = (struct ofi_op){ .type = OFI_OP_FLUSH,
					       .lane = (uint8_t)k,
					       .req = r,
					       .l = &c->lane[k] };
		if (!(lanes >> k & 1))
			ofi_req_leave_out(r, k);
	}
	ofi_mr_users_add(m, 1);       /* deregMr takes the read back first (ofi_mr.c) */
	r->magic = BRAID_MAGIC_FLUSH; /* test() comes to ofi_flush_test (plugin/core.c) */
}

/* The read on each lane, or behind its backlog; 0 or the first lane's error (WARNed), after
 * which no lane posts (the caller leaves the rest out). */
static int flush_post(struct ofi_comm *c, struct ofi_req *r, uint32_t lanes)
{
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];
		int rc, failed_before;

		if (!(lanes >> k & 1))
			continue;
		pthread_mutex_lock(&l->dev->ep_lock);
		failed_before = l->error != ncclSuccess;
		rc = failed_before ? -FI_EIO : ofi_post_flush(l, r);
		if (rc == -FI_EAGAIN) {
			ofi_lane_defer(l, r);
			rc = 0;
		}
		pthread_mutex_unlock(&l->dev->ep_lock);
		if (!rc)
			continue;
		BRAID_WARN("ofi: receive comm from %s: the flush read on %s (lane %d of %d): %s",
			   c->peer, l->dev->name, k, c->nlanes,
			   failed_before ? "the lane failed before" : ofi_strerror(rc));
		return rc;
	}
	return 0;
}

static void flush_free(struct ofi_comm *c, struct ofi_req *r)
{
	ofi_mr_users_add(ofi_req_recv(r)->mr[0], -1);
	r->magic = BRAID_MAGIC_DEAD;
	braid_pool_put(&c->reqs, r);
}

ncclResult_t ofi_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request)
{
	struct ofi_comm *c = to_ofi_comm(recv_comm);
	struct ofi_mr *m = NULL;
	struct ofi_req *r;
	uint32_t lanes, unable;
	int last = -1;

	*request = NULL;
	if (c->error != ncclSuccess)
		return c->error;
	for (int i = 0; i < n; i++) { /* as NCCL: the last buffer that received bytes */
		const struct ofi_mr *mi = to_ofi_mr(mhandles[i]);

		if (sizes[i] > 0 && mi && mi->magic == BRAID_MAGIC_MR)
			last = i;
	}
	if (last < 0)
		return ncclSuccess; /* nothing arrived: nothing to flush */
	m = to_ofi_mr(mhandles[last]);
	lanes = flush_lanes(c, m, &unable);
	if (unable)
		warn_no_flush(c);
	if (!lanes)
		return ncclSuccess;
	r = braid_pool_get(&c->reqs);
	if (!r) {
		/* A NULL request would tell NCCL there is nothing to flush: never that. NCCL
		 * keeps at most NCCL_NET_MAX_REQUESTS (32) requests in flight per comm,
		 * receives and flushes together: the pool holds that many. */
		BRAID_WARN("ofi: receive comm from %s: more than %u receives and flushes in flight "
			   "(NCCL_NET_MAX_REQUESTS)",
			   c->peer, c->reqs.nelem);
		return ncclInternalError;
	}
	flush_start(c, r, data[last], m, lanes);
	if (flush_post(c, r, lanes)) {
		if (!ofi_req_unpost(c, r)) {
			flush_free(c, r);
			return ncclSystemError;
		}
		/* out of every backlog now: a lane whose read waited there posts nothing */
		for (int k = 0; k < c->nlanes; k++) {
			pthread_mutex_lock(&c->lane[k].dev->ep_lock);
			if (!r->l[k].posted)
				ofi_req_leave_out(r, k);
			pthread_mutex_unlock(&c->lane[k].dev->ep_lock);
		}
		r->status = ncclSystemError; /* what was posted completes before test() says so */
	}
	*request = r;
	return ncclSuccess;
}

/* How long a flush read may take before test() gives up on it (a provider that lost it):
 * as long as a NIC may carry nothing under a waiting comm. */
static int flush_overdue(struct ofi_comm *c, struct ofi_req *r)
{
	uint64_t now;

	if (!braid_tick_due(&r->tick_left)) /* the clock every few waiting calls */
		return r->stalled;
	now = braid_now_ns();
	if (!r->waiting_ns) {
		r->waiting_ns = now;
		return 0;
	}
	if (now - r->waiting_ns <
	    (uint64_t)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS) * 1000000ULL)
		return 0;
	if (!r->stalled) {
		r->stalled = 1;
		BRAID_WARN("ofi: receive comm from %s: a flush read did not complete in %lld ms "
			   "(BRAID_OFI_DOWN_TIMEOUT_MS)",
			   c->peer, (long long)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS));
	}
	return 1;
}

ncclResult_t ofi_flush_test(void *request, int *done, int *sizes)
{
	struct ofi_req *r = to_ofi_req(request);
	struct ofi_comm *c = r->comm;
	ncclResult_t status = r->status;
	int complete = 1;

	(void)sizes; /* NCCL passes NULL for a flush */
	*done = 0;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];
		const struct ofi_req_lane *rl = &r->l[k];
		int rc = 0;

		pthread_mutex_lock(&l->dev->ep_lock);
		/* every NIC of a comm moves at each call (docs/multirail.md, deadlock rules) */
		if (c->nlanes > 1 || rl->pending || !rl->posted)
			rc = ofi_dev_progress(l->dev);
		if (rc)
			BRAID_WARN("ofi: fi_cq_read on %s (receive comm lane %u, peer %s): %s",
				   l->dev->name, l->id, c->peer, ofi_strerror(rc));
		/* a read that failed on a NIC the comm has since left out (its link down,
		 * failover): nothing more comes through it to flush */
		if (rl->failed && status == ncclSuccess && !(c->lanes_out >> k & 1))
			status = (ncclResult_t)rl->failed;
		/* a read its lane never posted never comes: the lane failed (its backlog went),
		 * or deregMr took the read back (ofi_lane_drop_mr) */
		if (!rl->posted && (l->error != ncclSuccess || rl->failed)) {
			ofi_lane_backlog_drop(l, r);
			if (status == ncclSuccess)
				status = rl->failed ? (ncclResult_t)rl->failed : l->error;
		} else if (rl->pending || !rl->posted) {
			complete = 0;
		}
		pthread_mutex_unlock(&l->dev->ep_lock);
		if (rc && status == ncclSuccess)
			status = ncclSystemError;
	}
	if (!complete)
		return flush_overdue(c, r) ? ncclSystemError : ncclSuccess;
	*done = 1;
	flush_free(c, r);
	return status;
}
