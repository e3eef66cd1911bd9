// SPDX-License-Identifier: Apache-2.0
/*
 * Posting a request's part on one lane, and what the provider refused for now: the lane's
 * backlog, posted in order from any progress of its device (ofi.h). Every function here
 * runs under the lane's device's ep_lock; none allocates.
 */
#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/log.h"
#include "plugin/params.h"

static char zero_byte; /* buffer for zero-length messages (some providers want non-NULL) */

int ofi_post_send(struct ofi_lane *l, struct ofi_req *r)
{
	struct ofi_req_lane *rl = &r->l[l->k];
	size_t len = r->slen[l->k];
	ssize_t rc;

	if (rl->posted)
		return 0;
	if (r->skip & (1u << l->k)) { /* no receive waits for it there */
		rl->posted = 1;
		return 0;
	}
	rc = fi_tsend(l->dev->ep, len ? r->sbuf + r->soff[l->k] : &zero_byte, len,
		      r->smr->lane[l->k]->desc, l->peer_addr, ofi_msg_tag(l->peer_id, r->first),
		      &ofi_req_sop(r, l->k)->fictx);
	if (rc)
		return (int)rc;
	if (__builtin_expect(l->prof != NULL, 0))
		ofi_prof_posted(l, r, 0);
	rl->pending++;
	rl->posted = 1;
	l->outstanding++;
	return 0;
}

/*
 * A fused receiver's announcement the kernel refused at once on lane l (tcp;ofi_rxm
 * connects on the first send; with the NIC's route gone, or the NIC down, connect fails:
 * no route to host, network unreachable) waits in the lane's backlog, as one refused for
 * now, with failover on: the sender, whose NIC there is down, asks the receiver to move
 * the group's parts (ofi_move.c), which drops it unsent. Tried again once per
 * BRAID_LIVENESS_MS; once one announcement has found no path for BRAID_OFI_DOWN_TIMEOUT_MS
 * (its group not moved) the error stands and the lane fails, as it did at once before.
 * One WARN until an announcement finds a path again. A path gone on the receiver's side
 * only (its route, with the sender's NIC up) draws no ask: the lane fails at the bound,
 * not at once; the receiver moving on its own is not built (docs/design/ofi-failover.md).
 */
static __attribute__((noinline)) int announce_unreachable(struct ofi_lane *l, struct ofi_req *r,
							  int rc)
{
	uint64_t now;

	if (!rc) { /* a path: the episode is over */
		l->unreach_ns = 0;
		return rc;
	}
	/* "not now" (rxm connecting) keeps an episode: it may fail at once again */
	if ((rc != -FI_EHOSTUNREACH && rc != -FI_ENETUNREACH && rc != -FI_ENETDOWN &&
	     rc != -FI_EADDRNOTAVAIL) ||
	    l->comm->nlanes < 2 || !l->comm->move_on)
		return rc;
	now = braid_now_ns();
	/* our own NIC down: nothing of the group went on it, its parts move now, no ask
	 * needed (the comm's thread, ofi_move_own) */
	if (ofi_dev_link_down(l->dev))
		__atomic_or_fetch(&l->comm->own_moves, 1u << l->k, __ATOMIC_RELAXED);
	if (l->unreach_ns && r != l->unreach_req) {
		/* the one before moved (ofi_lane_backlog_drop forgot it), or another group met
		 * the same gone path: a clock of its own, no new WARN */
		l->unreach_ns = now;
		l->unreach_req = r;
	} else if (!l->unreach_ns) {
		l->unreach_ns = now;
		l->unreach_req = r;
		BRAID_WARN("ofi: receive comm from %s: NIC %s (lane %u of %d): announcing group %u: "
			   "%s; it waits, for the sender to ask for its parts to move, up to %lld ms "
			   "(BRAID_OFI_DOWN_TIMEOUT_MS)",
			   l->comm->peer, l->dev->name, l->k, l->comm->nlanes,
			   ofi_req_recv(r)->rl[l->k].ann.seq, ofi_strerror(rc),
			   (long long)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS));
	} else if (now - l->unreach_ns >=
		   (uint64_t)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS) * 1000000ULL) {
		return rc;
	}
	l->unreach_retry_ns = now + (uint64_t)braid_param_int(BRAID_P_LIVENESS_MS) * 1000000ULL;
	return -FI_EAGAIN;
}

/* Stops quietly at -FI_EAGAIN. The announcement goes last, so a sender never sends into a
 * buffer that is not posted yet. */
int ofi_post_recv(struct ofi_lane *l, struct ofi_req *r)
{
	struct ofi_recv_part *recv = ofi_req_recv(r);
	struct ofi_recv_lane *part = &recv->rl[l->k];
	struct ofi_req_lane *rl = &r->l[l->k];
	struct ofi_dev *d = l->dev;

	while (rl->posted < r->n + 1) {
		int i = rl->posted;
		ssize_t rc;

		if (i < r->n && !(part->ann.e[i].flags & OFI_PART_POSTED)) {
			rl->posted++; /* no part here: nothing comes */
			rl->done_mask |= (uint8_t)(1u << i);
			continue;
		}
		if (i < r->n) {
			if (d->rx_cap && d->rx_posted >= d->rx_cap)
				return -FI_EAGAIN; /* the provider's queue is full */
			rc = fi_trecv(d->ep,
				      part->len[i] ? recv->buf[i] + part->off[i] : &zero_byte,
				      part->len[i], recv->mr[i]->lane[l->k]->desc, FI_ADDR_UNSPEC,
				      ofi_msg_tag(l->id, r->first + (uint64_t)i), 0,
				      &part->op[i].fictx);
			if (!rc)
				d->rx_posted++;
			if (!rc && __builtin_expect(l->prof != NULL, 0))
				ofi_prof_posted(l, r, i);
		} else {
			size_t len = ofi_announce_len(part->ann.n);

			if (__builtin_expect(l->unreach_ns != 0, 0) &&
			    braid_now_ns() < l->unreach_retry_ns)
				return -FI_EAGAIN; /* no path a moment ago */
			if (len <= d->inject_size) {
				rc = fi_inject(d->ep, &part->ann, len, l->peer_addr);
				if (__builtin_expect(rc != 0 || l->unreach_ns != 0, 0))
					rc = announce_unreachable(l, r, (int)rc);
				if (!rc) {
					rl->posted++; /* no completion will come */
					continue;
				}
			} else {
				rc = fi_send(d->ep, &part->ann, len, l->pool_desc, l->peer_addr,
					     &part->op[i].fictx);
				if (__builtin_expect(rc != 0 || l->unreach_ns != 0, 0))
					rc = announce_unreachable(l, r, (int)rc);
			}
		}
		if (rc)
			return (int)rc;
		rl->pending++;
		rl->posted++;
		l->outstanding++;
	}
	return 0;
}

/* Send r's lane-`from` part on lane l instead (ofi_move.c): counted on l. */
int ofi_post_moved_send(struct ofi_lane *l, struct ofi_req *r, int from)
{
	size_t len = r->slen[from];
	ssize_t rc;

	rc = fi_tsend(l->dev->ep, len ? r->sbuf + r->soff[from] : &zero_byte, len,
		      r->smr->lane[l->k]->desc, l->peer_addr,
		      ofi_moved_tag(l->peer_id, from, r->first), &ofi_req_sop(r, from)->fictx);
	if (rc)
		return (int)rc;
	r->l[l->k].pending++;
	l->outstanding++;
	return 0;
}

/* Receive buffer i's lane-`from` part on lane l instead (ofi_move.c): counted on l. */
int ofi_post_moved_recv(struct ofi_lane *l, struct ofi_req *r, int from, int i)
{
	struct ofi_recv_part *recv = ofi_req_recv(r);
	struct ofi_recv_lane *part = &recv->rl[from];
	struct ofi_dev *d = l->dev;
	ssize_t rc;

	if (d->rx_cap && d->rx_posted >= d->rx_cap)
		return -FI_EAGAIN;
	rc = fi_trecv(d->ep, part->len[i] ? recv->buf[i] + part->off[i] : &zero_byte, part->len[i],
		      recv->mr[i]->lane[l->k]->desc, FI_ADDR_UNSPEC,
		      ofi_moved_tag(l->id, from, r->first + (uint64_t)i), 0, &part->op[i].fictx);
	if (rc)
		return (int)rc;
	d->rx_posted++;
	r->l[l->k].pending++;
	__atomic_store_n(&r->l[l->k].moved_wait, (uint8_t)(r->l[l->k].moved_wait | 1u << i),
			 __ATOMIC_RELAXED);
	l->outstanding++;
	return 0;
}

/*
 * A flush (ofi_flush.c): one byte of the buffer read through the device's own endpoint
 * into the request's sink, with the registration's key, at its address or, without
 * FI_MR_VIRT_ADDR, its offset in the registration.
 */
int ofi_post_flush(struct ofi_lane *l, struct ofi_req *r)
{
	struct ofi_recv_part *recv = ofi_req_recv(r);
	struct ofi_recv_lane *part = &recv->rl[l->k];
	const struct ofi_dev_mr *m = recv->mr[0]->lane[l->k];
	uint64_t addr = (uint64_t)(uintptr_t)recv->buf[0], key = fi_mr_key(m->mr);
	struct ofi_req_lane *rl = &r->l[l->k];
	ssize_t rc;

	if (rl->posted)
		return 0;
	if (key == FI_KEY_NOTAVAIL) /* a raw key (FI_MR_RAW), which braid does not ask for */
		return -FI_ENOKEY;
	if (!l->dev->mr_virt_addr)
		addr -= m->range.base;
	rc = fi_read(l->dev->ep, &part->flush_sink, 1, l->pool_desc, l->self_av->addr, addr, key,
		     &part->op[0].fictx);
	if (rc)
		return (int)rc;
	rl->pending++;
	rl->posted = (uint8_t)(r->n + 1); /* the read is all there is */
	l->outstanding++;
	return 0;
}

int ofi_post_weights(struct ofi_lane *l, uint64_t wire, uint32_t seq)
{
	const struct ofi_announce m = { .dst = l->peer_id,
					.token = l->peer_token,
					.seq = seq,
					.kind = OFI_MSG_WEIGHTS,
					.first = wire };

	return (int)fi_inject(l->dev->ep, &m, ofi_announce_len(0), l->peer_addr);
}

void ofi_lane_defer(struct ofi_lane *l, struct ofi_req *r)
{
	struct ofi_dev *d = l->dev;

	l->backlog[l->backlog_tail++ % OFI_BACKLOG] = r;
	if (l->on_deferred)
		return;
	l->on_deferred = 1;
	l->deferred_next = d->deferred;
	d->deferred = l;
}

int ofi_post_part(struct ofi_lane *l, struct ofi_req *r)
{
	return r->is_send ? ofi_post_send(l, r) : ofi_post_recv(l, r);
}

int ofi_post_backlog(struct ofi_lane *l)
{
	while (ofi_lane_backlogged(l)) {
		struct ofi_req *r = l->backlog[l->backlog_head % OFI_BACKLOG];
		/* A data request waits here only for its part on l (r->lanes has l); a flush
		 * has no parts (lanes 0). Not r->magic: isend and irecv set it after they
		 * post, without the lock. */
		int flush = !r->lanes;
		int rc = flush ? ofi_post_flush(l, r) : ofi_post_part(l, r);
		const char *what = r->is_send ? "send" : flush ? "flush read" : "receive";

		if (rc == -FI_EAGAIN)
			return rc;
		if (rc) {
			BRAID_WARN("ofi: %s comm lane %u on %s to %s: posting a deferred %s failed: "
				   "%s",
				   ofi_comm_kind(l->comm), l->id, l->dev->name, l->comm->peer, what,
				   ofi_strerror(rc));
			ofi_lane_fail(l, ncclSystemError);
			l->backlog_head = l->backlog_tail;
			return 0;
		}
		l->backlog_head++;
	}
	return 0;
}

int ofi_post_announce_bufs(struct ofi_dev *d)
{
	if (d->ann_closing || !d->ann_nunposted) /* every call's progress: mostly none */
		return 0;
	for (uint32_t w = 0; w < (d->nann + 63) / 64; w++) {
		while (d->ann_unposted[w]) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(d->ann_unposted[w]);
			struct ofi_announce_slot *slot = &d->ann[i];
			ssize_t rc;

			if (d->rx_cap && d->rx_posted >= d->rx_cap)
				return 0;
			/* Untagged, one queue for every lane's announcements (the lane is in
			 * the message): no ignore bits, which libfabric 1.17's shm mishandles
			 * for unexpected messages, and no tagged receive for a data message
			 * to match past. */
			rc = fi_recv(d->ep, &slot->msg, sizeof(slot->msg), d->ann_desc,
				     FI_ADDR_UNSPEC, &slot->op.fictx);
			if (rc == -FI_EAGAIN)
				return 0; /* again from the next progress */
			if (rc)
				return (int)rc;
			d->rx_posted++;
			d->ann_unposted[w] &= d->ann_unposted[w] - 1;
			if (!--d->ann_nunposted)
				return 0; /* the words after: nothing */
		}
	}
	return 0;
}
