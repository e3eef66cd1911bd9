// SPDX-License-Identifier: Apache-2.0
/*
 * isend / irecv / test on a comm's lanes (protocol and locking in ofi.h). A call takes
 * each lane's ep_lock once: it moves the lane's device (reading the shared CQ completes
 * other comms' requests too), then posts or reads the lane's part. No allocation and no
 * system call beyond libfabric's own: requests come from the comm's pool, and the peer
 * check (one poll() on the link) runs at most every BRAID_LIVENESS_MS.
 */
#include <stdio.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/clock.h"
#include "plugin/judge.h"
#include "plugin/log.h"
#include "plugin/params.h"

/* What a completion left for the peer to hear (ofi_cq.c), told by the comm's thread, which
 * alone writes its link: when the comm fails, or at the latest before its goodbye. */
static void tell_peer(struct ofi_comm *c)
{
	for (int k = 0; k < c->nlanes; k++)
		if (__atomic_exchange_n(&c->lane[k].tell_trunc, 0, __ATOMIC_ACQ_REL))
			braid_link_report_error(c->link, ncclRemoteError,
						"a message larger than its receive buffer");
}

/* The first failure of a comm is sticky: every later call reports it (plugin/judge.c). */
static void comm_fail(struct ofi_comm *c, ncclResult_t why)
{
	braid_judge_comm_fail(&c->error, why, c->ctr, c->lane[0].dev->ctr);
	tell_peer(c);
}

/* How the judgement's WARNs name the comm. */
static void comm_who(const void *comm, char *buf, size_t len)
{
	const struct ofi_comm *c = comm;

	snprintf(buf, len, "ofi: %s comm on %s", ofi_comm_kind(c), c->lane[0].dev->name);
}

/* Move lane l's device and take in what its completions said; ep_lock held. */
static void lane_progress(struct ofi_comm *c, struct ofi_lane *l)
{
	int rc = ofi_dev_progress(l->dev);

	if (rc) {
		BRAID_WARN("ofi: fi_cq_read on %s (%s comm lane %u, peer %s): %s", l->dev->name,
			   ofi_comm_kind(c), l->id, c->peer, ofi_strerror(rc));
		comm_fail(c, ncclSystemError);
	}
	if (l->error != ncclSuccess)
		comm_fail(c, l->error);
}

/* Before posting on lane l: its errors, and its backlog first (a new part goes behind
 * it); the CQ itself is read when the request is tested. ep_lock held. */
static void lane_check(struct ofi_comm *c, struct ofi_lane *l)
{
	if (ofi_lane_backlogged(l))
		lane_progress(c, l);
	else if (l->error != ncclSuccess)
		comm_fail(c, l->error);
}

/* Every lane from `from` on: a call moves every lane's device, whatever it waits for (a
 * lane's deferred operations, and so the announcement a peer waits for, are posted only
 * by progress on its own device). */
static void progress_lanes(struct ofi_comm *c, int from)
{
	for (int k = from; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];

		pthread_mutex_lock(&l->dev->ep_lock);
		lane_progress(c, l);
		pthread_mutex_unlock(&l->dev->ep_lock);
	}
}

/* ---- the peer ---- */

/*
 * Look at the link, now and then: a peer that died hung up without a goodbye; a peer
 * whose comm failed in a way we cannot see said so; a peer that closed its comm said
 * goodbye, and that fails nothing by itself (requests decide, in check_request()). idle:
 * irecv on a comm with nothing in flight, every BRAID_LIVENESS_MS; else on the link's tick
 * too (braid_link_check_post).
 */
static void check_peer(struct ofi_comm *c, int idle)
{
	enum braid_link_state was = c->link->state, st;
	struct ofi_dev *d = c->lane[0].dev;

	if (c->error != ncclSuccess)
		return;
	st = braid_link_check_post(c->link, idle);
	/* A death or failure is reported again if the link saw it first elsewhere; a
	 * goodbye is said once. */
	if (st == was && st != BRAID_LINK_DEAD && st != BRAID_LINK_FAILED)
		return;
	switch (st) {
	case BRAID_LINK_DEAD:
		BRAID_WARN("ofi: %s comm on %s: peer %s hung up without closing its comm "
			   "(process exited or killed?) with %d request(s) in flight",
			   ofi_comm_kind(c), d->name, c->peer, c->inflight);
		/* shm completes an endpoint's sends in order: one to the dead peer blocks all
		 * later ones, to live peers too (docs/reliability.md, "Kills at every step") */
		if (c->is_send && c->inflight && !strcmp(d->info->fabric_attr->prov_name, "shm"))
			BRAID_WARN("ofi: libfabric shm on %s: sends still in flight to dead peer "
				   "%s may keep this device's later sends, to every peer, from "
				   "completing; watch `braid stat` stalls",
				   d->name, c->peer);
		comm_fail(c, ncclRemoteError);
		break;
	case BRAID_LINK_FAILED:
		BRAID_WARN("ofi: %s comm on %s: peer %s reports: %s", ofi_comm_kind(c), d->name,
			   c->peer, c->link->peer_why);
		comm_fail(c, c->link->peer_code == ncclInvalidUsage ? ncclInvalidUsage
								    : ncclRemoteError);
		break;
	case BRAID_LINK_BYE:
		BRAID_INFO(NCCL_NET,
			   "ofi: %s comm on %s: peer %s closed its comm, %d request(s) in "
			   "flight here",
			   ofi_comm_kind(c), d->name, c->peer, c->inflight);
		break;
	default: break;
	}
}

/* A waiting comm's NICs: one that what it waits for is on (wait, a mask of lanes) whose
 * interface stayed down too long fails it (ofi_live.c). */
static void check_nics(struct ofi_comm *c, uint64_t now, uint32_t wait)
{
	if (now >= c->live_next_ns && c->error == ncclSuccess && ofi_live_watch(c, now, wait))
		comm_fail(c, ncclSystemError);
}

/* After the peer's goodbye no new receive of this comm can ever complete. */
static ncclResult_t refuse_after_bye(struct ofi_comm *c)
{
	if (braid_judge_refuse_after_bye(c->link, c->is_send, comm_who, c))
		comm_fail(c, ncclRemoteError);
	return c->error;
}

/* A request still waiting: can it still complete? The comm's error, or the request's.
 * done: the buffers whose every part arrived. */
static ncclResult_t check_request(struct ofi_comm *c, struct ofi_req *r, uint8_t done,
				  uint8_t lanes_done)
{
	uint64_t bufs[BRAID_MAX_RECVS];
	int n = 0;

	if (braid_tick_due(&r->tick_left)) { /* what is timed: on a tick (plugin/clock.h) */
		uint64_t now = braid_now_ns();

		/* counted on every NIC the request waits on, as each NIC's own stall */
		if (braid_ctr_stall_due(&r->waiting_ns, now, &r->stalled))
			for (int k = 0; k < c->nlanes; k++)
				braid_ctr_add(&c->lane[k].dev->ctr->stalls, 1);
		check_nics(c, now, r->lanes & ~(uint32_t)lanes_done);
		if (__builtin_expect(c->move_ask_ns != 0, 0) && !c->is_send && now < c->move_ask_ns)
			braid_link_look_soon(c->link); /* the sender asks again soon (ofi_move.c) */
		if (__builtin_expect(c->own_moves != 0, 0))
			ofi_move_own(c); /* announcements stuck on a NIC down here */
		if (!r->is_send && lanes_done && c->error == ncclSuccess &&
		    ofi_live_parts(c, r, lanes_done, now))
			comm_fail(c, ncclSystemError);
		if (r->is_send)
			ofi_live_send_waits(c, r, lanes_done, now);
	}
	check_peer(c, 0);
	if (c->error != ncclSuccess)
		return c->error;
	if (!braid_judge_due(c->link, r->status))
		return r->status;
	if (r->is_send)
		bufs[n++] = r->first;
	if (__builtin_expect(r->moved, 0)) /* a part moved to another lane is still out there */
		for (int k = 0; k < c->nlanes; k++)
			done &= (uint8_t)~__atomic_load_n(&r->l[k].moved_wait, __ATOMIC_RELAXED);
	for (int i = 0; !r->is_send && i < r->n; i++)
		if (!(done & (1u << i)))
			bufs[n++] = r->first + (uint64_t)i;
	braid_judge_verdict(c->link, &r->status, bufs, n, r->is_send, comm_who, c);
	return r->status;
}

/* ---- isend ---- */

/* The unused buffer of the current group with NCCL's tag, once the group is announced on
 * every lane it names: -1 if none yet. Sets its lanes (c->gmask), the first (c->gref). */
static int match_buffer(struct ofi_comm *c, int tag)
{
	const struct ofi_group *g = &c->lane[0].ring[c->seq % OFI_MAX_INFLIGHT];
	uint32_t want, in;

	if (c->nlanes > 1) { /* one lane: its group is the comm's (gmask 1, gref 0) */
		g = ofi_send_group(c, &want, &in);
		/* a lane whose parts the receiver was asked to move: only once they have */
		if (__builtin_expect(c->move_asked != 0, 0) && c->move_seq == c->seq)
			in &= ~(c->move_asked & ~c->move_done);
		if (!g || (in & want) != want ||
		    (__builtin_expect(c->told_down & want, 0) && ofi_move_lost(c, want, in)))
			return -1; /* lanes down here whose parts can still move: ask first */
		c->gmask = want;
		c->gref = __builtin_ctz(want);
	} else if (!__atomic_load_n(&g->arrived, __ATOMIC_ACQUIRE)) {
		return -1;
	}
	for (uint32_t i = 0; i < g->ann.n; i++)
		if (g->ann.e[i].tag == tag && !(g->used & (1u << i)))
			return (int)i;
	return -1;
}

/* Cut the message over the lanes by the parts the receiver announced for buffer idx,
 * truncated to the buffer's size, as NCCL's IB transport truncates. Inline: isend's. */
__attribute__((always_inline)) inline void ofi_cut_send(struct ofi_comm *c, struct ofi_req *r,
							int idx, size_t size)
{
	uint32_t slot = c->seq % OFI_MAX_INFLIGHT, via = 0;
	size_t off = 0;
	int counted = 0;

	r->skip = 0;
	r->lanes = (uint8_t)c->gmask;
	for (int k = 0; k < c->nlanes; k++) {
		int in = c->gmask >> k & 1;
		size_t part = in ? c->lane[k].ring[slot].ann.e[idx].size : 0;
		int posted = in && (c->lane[k].ring[slot].ann.e[idx].flags & OFI_PART_POSTED);

		r->soff[k] = off;
		r->slen[k] = size > off ? (size - off < part ? size - off : part) : 0;
		if (!posted)
			r->skip |= (uint8_t)(1u << k);
		if (!in)
			ofi_req_leave_out(r, k);
		*ofi_req_sop(r, k) = (struct ofi_op){ .type = OFI_OP_SEND,
						      .lane = (uint8_t)k,
						      .counts = (uint8_t)(posted && !counted),
						      .req = r,
						      .l = &c->lane[k] };
		counted |= posted;
		off += part;
		via |= c->lane[k].ring[slot].via;
	}
	r->ssize = size < off ? size : off;
	/* parts moved to other lanes, asked for or unasked (ahead of c->seq): the slot says */
	if (__builtin_expect(via != 0, 0))
		ofi_move_cut_send(c, r, slot);
}

/* Lane l's part of send r is posted or queued: the group's buffer is used there. */
static void lane_sent(struct ofi_lane *l, int idx)
{
	struct ofi_group *g = &l->ring[l->seq % OFI_MAX_INFLIGHT];

	g->used |= 1u << idx;
	if (g->used == (1u << g->ann.n) - 1) {
		__atomic_store_n(&g->arrived, 0, __ATOMIC_RELAXED);
		g->via = 0;
		l->seq++;
	}
}

/*
 * Post send or receive r on every lane. 1: not taken (nothing of it is with the provider or
 * queued); 0: posted, or queued behind a lane's backlog; -1: failed. Only the first lane
 * may answer "not now": once a lane took its part the others queue theirs. A receive
 * also queues behind lane 0's backlog, and once part of it is posted there.
 */
static int post_lanes(struct ofi_comm *c, struct ofi_req *r, int idx)
{
	/* After the peer's goodbye an announced buffer is still a match, as NCCL's isend
	 * sees only its FIFO: a send the provider cannot take now (tcp;ofi_rxm cannot reach
	 * an endpoint the peer closed with its last comm) is taken all the same, and
	 * test() says what became of it, rather than "not now" for ever. It is not queued:
	 * the receive it answers is gone, and NCCL may deregister the buffer before it
	 * closes the comm (ncclCommAbort). */
	int peer_bye = r->is_send && c->link->state == BRAID_LINK_BYE;

	/* A lane the request's group leaves out (ofi_req_leave_out) takes nothing: its part
	 * reads as posted. It still moves, as every lane of a call does. */
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];
		int backlogged, rc;

		pthread_mutex_lock(&l->dev->ep_lock);
		lane_check(c, l);
		backlogged = ofi_lane_backlogged(l);
		if (__builtin_expect(!backlogged, 1))
			rc = ofi_post_part(l, r);
		else /* behind the backlog, unless nothing of it goes here (left out, moved) */
			rc = r->l[k].posted ? 0 : -FI_EAGAIN;
		if (rc == -FI_EAGAIN && k == 0 && !peer_bye &&
		    (r->is_send || (!backlogged && !r->l[0].posted))) {
			lane_progress(c, l); /* what the provider waits for */
			pthread_mutex_unlock(&l->dev->ep_lock);
			progress_lanes(c, 1);
			return 1;
		}
		if (rc == -FI_EAGAIN) {
			if (!peer_bye)
				ofi_lane_defer(l, r);
			rc = 0;
		}
		if (!rc && r->is_send && (r->lanes >> k & 1))
			lane_sent(l, idx);
		pthread_mutex_unlock(&l->dev->ep_lock);
		if (rc) {
			/* Posted receive buffers stay with the provider until the endpoint
			 * closes: the comm is done. */
			BRAID_WARN("ofi: %s of %zu bytes on %s %s comm lane %u, peer %s: posting "
				   "failed: %s",
				   r->is_send ? "isend" : "irecv",
				   r->is_send ? r->slen[k] : ofi_req_recv(r)->size[0], l->dev->name,
				   ofi_comm_kind(c), l->id, c->peer, ofi_strerror(rc));
			comm_fail(c, ncclSystemError);
			return -1;
		}
	}
	return 0;
}

ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request)
{
	struct ofi_comm *c = to_ofi_comm(send_comm);
	struct ofi_mr *m = to_ofi_mr(mhandle);
	uint64_t now, upto;
	const struct ofi_group *g;
	struct ofi_req *r;
	int idx, rc;

	if (!braid_mr_range_covers(&m->range, data, size)) {
		BRAID_WARN("ofi: isend of %zu bytes at %p on send comm to %s is outside its "
			   "registration [%#lx, +%zu)",
			   size, data, c->peer, (unsigned long)m->range.base, m->range.len);
		return ncclInvalidArgument;
	}
	/* Not refused after the peer's goodbye as such: a receive it posted before is still a
	 * match, as in NCCL's IB transport (braid_judge_refuse_unannounced). */
	check_peer(c, 0);
	if (c->error != ncclSuccess)
		return c->error;
	idx = match_buffer(c, tag);
	/* not announced yet, no free buffer with this tag, or more than maxRecvs x 32 in
	 * flight: NCCL calls again */
	r = idx >= 0 ? braid_pool_get(&c->reqs) : NULL;
	if (!r) {
		uint32_t want, in;

		progress_lanes(c, 0);
		if (braid_tick_due(&c->tick_left)) {
			now = braid_now_ns(); /* the announcement may wait on a dead NIC */
			if (c->nlanes > 1 && c->error == ncclSuccess) {
				ofi_live_send_lanes(c, now);
				if (idx < 0 && c->move_on)
					ofi_move_ask(c, now);
			}
			/* the lanes of a group announced on some of them, not all, but those
			 * the receiver was just asked to move */
			check_nics(c, now,
				   ofi_send_group(c, &want, &in)
					   ? want & ~in & ~ofi_move_awaited(c, now)
					   : 0);
			if (c->nlanes > 1 && c->error == ncclSuccess && idx < 0 &&
			    ofi_live_announce(c, now))
				comm_fail(c, ncclSystemError);
		}
		if (__builtin_expect(c->move_asked != 0, 0) && ofi_move_awaited(c, 0))
			braid_link_look_soon(c->link); /* the answer: at the next call */
		if (c->error == ncclSuccess && idx < 0 &&
		    braid_judge_refuse_unannounced(c->link, c->sent_upto, comm_who, c))
			comm_fail(c, ncclRemoteError);
		return c->error;
	}
	g = &c->lane[c->gref].ring[c->seq % OFI_MAX_INFLIGHT];
	ofi_req_start(r, c, 1, 1);
	r->first = g->ann.first + (uint64_t)idx;
	r->sbuf = data;
	r->smr = m;
	ofi_cut_send(c, r, idx, size);
	/* read before posting: once the group is used up, its slot may take another */
	upto = g->ann.first + g->ann.n;
	/* The lanes the group leaves out move on before its last buffer goes: the receiver
	 * needs nothing from them to complete the group and announce its next ones there. */
	if (c->gmask != ofi_all_lanes(c) && (g->used | 1u << idx) == (1u << g->ann.n) - 1)
		ofi_live_send_left_out(c);
	rc = post_lanes(c, r, idx);
	/* parts moved to other lanes go once the rest has (their lanes read posted above) */
	if (!rc && __builtin_expect(r->moved != 0, 0) && ofi_move_post_send(c, r)) {
		comm_fail(c, ncclSystemError);
		rc = -1;
	}
	if (rc < 0 && ofi_req_unpost(c, r)) { /* some of it is with the provider until close */
		r->magic = BRAID_MAGIC_REQ;
		ofi_mr_users_add(m, 1);
		return c->error;
	}
	if (rc) {
		braid_pool_put(&c->reqs, r);
		return c->error;
	}
	if (c->lane[c->gref].seq != c->seq) { /* the group is used up */
		c->sent_upto = upto;
		c->seq++;
	}
	if (c->nlanes > 1) { /* one lane: no stripe, no clock */
		now = braid_now_ns();
		ofi_live_send_lanes(c, now);
		for (int k = 0; k < c->nlanes; k++) /* a moved part: no sample (ofi_move.c) */
			braid_stripe_posted(&c->stripe, k, r->moved >> k & 1 ? 0 : r->slen[k], now);
		for (int k = 0; c->ctr && k < c->nlanes && k < BRAID_CTR_MAX_LANES; k++) {
			braid_ctr_add(&c->ctr->lanes[k].bytes, r->slen[k]);
			braid_ctr_add(&c->ctr->lanes[k].chunks, !(r->skip >> k & 1));
		}
	}
	r->magic = BRAID_MAGIC_REQ;
	ofi_mr_users_add(m, 1);
	c->inflight++;
	*request = r;
	return ncclSuccess;
}

/* ---- irecv ---- */
/* Cut each buffer into one part per lane by the sender's weights; write the announcements. */
static void cut_recv(struct ofi_comm *c, struct ofi_req *r, const int *tags)
{
	struct ofi_recv_part *recv = ofi_req_recv(r);
	uint32_t lanes, kind;

	if (c->nlanes > 1) /* the lanes of the group (ofi_live.c), the sender's weights */
		ofi_stripe_follow(c);
	lanes = c->lanes_in;
	kind = c->ann_kind;
	r->lanes = (uint8_t)lanes;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];
		struct ofi_recv_lane *part = &ofi_req_recv(r)->rl[k];

		part->ann = (struct ofi_announce){ .dst = l->peer_id,
						   .n = (uint16_t)r->n,
						   .token = l->peer_token,
						   .seq = c->seq,
						   .kind = kind,
						   .first = r->first };
		for (int i = 0; i <= r->n; i++)
			part->op[i] = (struct ofi_op){ .type = i < r->n ? OFI_OP_RECV
									: OFI_OP_ANNOUNCE_SEND,
						       .idx = (uint8_t)i,
						       .lane = (uint8_t)k,
						       .req = r,
						       .l = l };
	}
	for (int i = 0; i < r->n; i++) {
		size_t len[BRAID_STRIPE_MAX_LANES], off = 0; /* lanes < nlanes written */
		int first = 0;

		len[0] = recv->size[i];
		if (c->nlanes > 1)
			braid_stripe_split(&c->stripe, recv->size[i], len, &first);
		for (int k = 0; k < c->nlanes; k++) {
			recv->rl[k].len[i] = len[k];
			recv->rl[k].off[i] = off;
			recv->rl[k].ann.e[i].size = len[k];
			recv->rl[k].ann.e[i].tag = tags[i];
			recv->rl[k].ann.e[i].flags = OFI_PART_POSTED;
			recv->rl[k].op[i].counts = (uint8_t)(k == first);
			off += len[k];
		}
		if (c->nlanes > 1) {
			/* A lane with none of the buffer posts no receive, and the sender
			 * sends nothing there (no 0-byte message: 15 % of a fused 8-byte
			 * message). The sender may mark the buffer used there only after
			 * the others are posted: a lag irecv's bound (recv_max) allows. */
			for (int k = 0; k < c->nlanes; k++)
				if (!len[k] && k != first)
					recv->rl[k].ann.e[i].flags = 0;
			if (r->n > 1) /* by the weights over the group's buffers too */
				ofi_stripe_hold(c, r, i, 1);
		}
	}
	for (int i = 0; r->n > 1 && c->nlanes > 1 && i < r->n; i++)
		ofi_stripe_hold(c, r, i, -1);
	for (int k = 0; c->lanes_out && k < c->nlanes; k++)
		if (!(lanes >> k & 1))
			ofi_req_leave_out(r, k);
}

ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request)
{
	struct ofi_comm *c = to_ofi_comm(recv_comm);
	struct ofi_recv_part *recv;
	struct ofi_req *r;
	uint64_t now;
	int rc;

	for (int i = 0; i < n; i++) {
		if (!braid_mr_range_covers(&to_ofi_mr(mhandles[i])->range, data[i], sizes[i])) {
			BRAID_WARN("ofi: irecv buffer %d (%zu bytes at %p) on receive comm from %s "
				   "is outside its registration",
				   i, sizes[i], data[i], c->peer);
			return ncclInvalidArgument;
		}
	}
	/* a goodbye or the peer's word before it announces: an idle comm at once, a busy one
	 * on its tick (a receive announced on a lane the sender has down is moved: ofi_move.c) */
	check_peer(c, !c->inflight);
	if (c->error != ncclSuccess || refuse_after_bye(c))
		return c->error;
	r = c->inflight < c->recv_max ? braid_pool_get(&c->reqs) : NULL;
	if (!r) {
		progress_lanes(c, 0);
		return c->error;
	}
	recv = ofi_req_recv(r);
	ofi_req_start(r, c, 0, n);
	r->first = c->nbufs;
	for (int i = 0; i < n; i++) {
		recv->size[i] = sizes[i];
		recv->buf[i] = data[i];
		recv->mr[i] = to_ofi_mr(mhandles[i]);
		ofi_mr_users_add(recv->mr[i], 1); /* let go if it is not taken */
	}
	cut_recv(c, r, tags);
	rc = post_lanes(c, r, 0);
	if (rc) {
		if (rc > 0 || !ofi_req_unpost(c, r)) {
			ofi_req_hold_mrs(r, -1);
			braid_pool_put(&c->reqs, r);
		} else { /* some of it is with the provider until the comm closes */
			r->magic = BRAID_MAGIC_REQ;
		}
		return c->error;
	}
	now = c->nlanes > 1 ? braid_now_ns() : 0; /* one lane: no stripe, no clock */
	for (int k = 0; c->nlanes > 1 && k < c->nlanes; k++) {
		size_t bytes = 0;

		/* the announced part: len[] is the CQ reader's once posted */
		for (int i = 0; i < n; i++)
			bytes += recv->rl[k].ann.e[i].size;
		braid_stripe_posted(&c->stripe, k, bytes, now);
	}
	r->magic = BRAID_MAGIC_REQ;
	c->inflight++;
	c->seq++;
	c->nbufs += (uint64_t)n;
	*request = r;
	return ncclSuccess;
}

/* ---- test ---- */
/* Receiver: what arrived in each buffer, and each lane's bytes for the stripe. */
static void receiver_completed(struct ofi_comm *c, struct ofi_req *r, int *sizes)
{
	const struct ofi_recv_part *recv = ofi_req_recv(r);
	size_t got[BRAID_MAX_RECVS] = { 0 };

	if (c->nlanes > 1) /* the stripe's samples and the lanes' counters */
		ofi_stripe_received(c, r);
	for (int k = 0; k < c->nlanes; k++)
		for (int i = 0; i < r->n; i++)
			got[i] += recv->rl[k].len[i];
	for (int i = 0; sizes && i < r->n; i++)
		sizes[i] = braid_size_int(got[i]);
}

/* Every part of r on a lane posted, and every completion in. ep_lock held. */
static int lane_complete(const struct ofi_req *r, const struct ofi_req_lane *rl)
{
	return rl->pending == 0 && rl->posted == (r->is_send ? 1 : r->n + 1);
}

ncclResult_t ofi_test(void *request, int *done, int *sizes)
{
	struct ofi_req *r = to_ofi_req(request);
	struct ofi_comm *c = r->comm;
	ncclResult_t status = r->status;
	uint8_t all_done = 0xff, lanes_done = 0;
	int complete = 1;

	*done = 0;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];
		const struct ofi_req_lane *rl = &r->l[k];

		pthread_mutex_lock(&l->dev->ep_lock);
		/* A request of several lanes waits on each lane's device: every one moves
		 * (docs/multirail.md, deadlock rules); one NIC done needs no CQ read. */
		if (!lane_complete(r, rl) || c->nlanes > 1)
			lane_progress(c, l);
		else if (l->error != ncclSuccess)
			comm_fail(c, l->error);
		if (lane_complete(r, rl))
			lanes_done |= (uint8_t)(1u << k);
		else
			complete = 0;
		if (rl->failed && status == ncclSuccess)
			status = (ncclResult_t)rl->failed;
		all_done &= rl->done_mask;
		pthread_mutex_unlock(&l->dev->ep_lock);
	}
	if (r->is_send && c->nlanes > 1 && (lanes_done & ~r->noted))
		ofi_stripe_sent(c, r, lanes_done & ~r->noted);
	if (!complete) {
		if (status != ncclSuccess && r->status == ncclSuccess)
			r->status = status;
		return check_request(c, r, all_done, lanes_done); /* it waits, or never completes */
	}
	*done = 1;
	/* what failed without a completion (a lane's error) stops as NCCL learns it */
	if (__builtin_expect(c->prof != NULL, 0))
		ofi_prof_end(c, r);
	if (r->is_send) {
		if (sizes)
			sizes[0] = braid_size_int(r->ssize);
		ofi_mr_users_add(r->smr, -1);
	} else {
		receiver_completed(c, r, sizes);
		ofi_req_hold_mrs(r, -1);
	}
	braid_ctr_count(c->ctr, c->lane[0].dev->ctr, BRAID_CTR(completions), 1);
	c->inflight--;
	r->magic = BRAID_MAGIC_DEAD;
	braid_pool_put(&c->reqs, r);
	return status;
}

/* ---- goodbye ---- */

void ofi_comm_bye(struct ofi_comm *c, struct braid_link_bye *bye)
{
	uint8_t done[OFI_MAX_INFLIGHT];
	struct braid_judge_wait w[OFI_MAX_INFLIGHT];
	int failed = 0, nw = 0;

	memset(done, 0xff, sizeof(done));
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];

		pthread_mutex_lock(&l->dev->ep_lock);
		failed |= ofi_dev_progress(l->dev) != 0;
		for (uint32_t i = 0; !c->is_send && i < c->reqs.nelem && i < OFI_MAX_INFLIGHT;
		     i++) {
			const struct ofi_req *r = braid_pool_at(&c->reqs, i);

			/* a part moved onto this lane and still out is not in */
			if (braid_pool_is_used(&c->reqs, i))
				done[i] &= r->l[k].done_mask & ~r->l[k].moved_wait;
		}
		pthread_mutex_unlock(&l->dev->ep_lock);
	}
	tell_peer(c); /* ahead of the goodbye */
	if (failed) {
		braid_bye_init(bye, 0, 0);
		return;
	}
	if (c->is_send) {
		/* every buffer below sent_upto was sent to, and those of the current group
		 * (its first is sent_upto) that are marked used (on every lane at once: isend
		 * posts or queues all) */
		uint32_t want, in;
		const struct ofi_group *g = ofi_send_group(c, &want, &in);

		braid_judge_bye_send(bye, c->sent_upto, g ? g->ann.n : 0, g ? g->used : 0);
		return;
	}
	/* receiver: every buffer is filled but those of requests still waiting */
	for (uint32_t i = 0; i < c->reqs.nelem && i < OFI_MAX_INFLIGHT; i++) {
		const struct ofi_req *r = braid_pool_at(&c->reqs, i);

		if (braid_pool_is_used(&c->reqs, i) && r->magic != BRAID_MAGIC_FLUSH)
			w[nw++] = (struct braid_judge_wait){ .first = r->first,
							     .n = r->n,
							     .done = done[i] };
	}
	braid_judge_bye_recv(bye, c->nbufs, w, nw);
}
