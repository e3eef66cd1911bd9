// SPDX-License-Identifier: Apache-2.0
/*
 * A fused comm's parts moved off a NIC that is down on the sender's side, before anything
 * of them was sent (issue 19; docs/design/ofi-failover.md, "A first slice of step 3").
 *
 * A fused receiver announces a group on every lane it names. When the sender's own NIC on
 * lane k is down, lane k's announcement is stuck behind it, and without it the sender
 * sends nothing of the group. The receiver cannot tell: its own NIC reads up (a port down
 * at the far end of a link keeps this end's carrier when a switch is between them), and in
 * NCCL both ranks post a collective's first receives at once, so the sender's word on its
 * NICs (ofi_live.c) cannot be relied on to come first. So the sender asks, over the
 * comm's link (plugin/link.h, in order with everything else on it):
 *   MOVE_REQ {group, lanes}, sender -> receiver: "nothing of the group has gone, or will
 *     go, on these lanes: move their parts";
 *   MOVED {group, lane k, lane j, k's announcement}, receiver -> sender: lane k's
 *     receives of the group are cancelled (none had matched: nothing was sent on k) and
 *     posted again on lane j under their moved tags (ofi_moved_tag); or refused (ok 0:
 *     the sender goes on waiting for lane k, and fails at BRAID_OFI_DOWN_TIMEOUT_MS).
 *     An ask for a lane moved already, or for a group complete here, gets no answer:
 *     an unasked MOVED (ofi_move_own) crossed it and answered; a late refusal is ignored.
 * The sender then sends lane k's parts on lane j, as parts of the same request.
 * Completion stays by identity: a moved part's operation names its buffer and its own
 * lane (ofi_op.from) and counts on the lane it went to (ofi_op.lane), under that lane's
 * ep_lock; the lane's own announcement, if it ever comes, is dropped (ofi_lane.moved_seq).
 * What had been sent on a NIC when it failed is not moved: it waits for the NIC, and the
 * comm fails at the bound, as before (the full replay, not built).
 * Nothing here runs per message: the sender asks from a NULL isend's tick and the receiver
 * moves from its link check; the data path pays a mask test or two (ofi_cut_send, post_lanes,
 * test). With BRAID_FAILOVER=0 the sender never asks.
 */
#include <sched.h>
#include <stddef.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/clock.h"
#include "plugin/judge.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define OFI_MOVE_REQ_MAGIC 0x6f666d71u /* "ofmq" */
#define OFI_MOVED_MAGIC 0x6f666d76u    /* "ofmv" */
/* how long a post on the lane a part moves to may answer "not now" before the comm fails */
#define OFI_MOVE_POST_MS 1000

struct ofi_move_req {
	uint32_t magic;
	uint32_t seq;   /* the group */
	uint32_t lanes; /* the lanes whose parts to move */
};

struct ofi_moved {
	uint32_t magic;
	uint32_t seq;
	uint8_t from; /* the lane whose parts moved */
	uint8_t via;  /* the lane they moved to */
	uint8_t ok;   /* 0: refused, nothing moved */
	uint8_t pad;
	struct ofi_announce ann; /* lane from's announcement of the group; its n entries travel */
};
#define OFI_MOVED_HEAD offsetof(struct ofi_moved, ann)

/* One WARN per comm and lane while its NIC stays down, for the first group moved off it;
 * the next groups' at INFO. The bit clears when the lane is back (ofi_live.c). */
static enum braid_log_level move_level(struct ofi_comm *c, int k)
{
	if (c->move_warned >> k & 1)
		return BRAID_LOG_INFO;
	c->move_warned |= 1u << k;
	return BRAID_LOG_WARN;
}

/* ---- sender ---- */

uint32_t ofi_move_awaited(const struct ofi_comm *c, uint64_t now)
{
	uint64_t bound = (uint64_t)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS) * 1000000ULL;

	if (c->move_seq != c->seq || (now && now - c->move_ask_ns >= bound))
		return 0;
	return c->move_asked & ~(c->move_done | c->move_refused);
}

/*
 * The current group's lanes whose parts should move before anything goes: their NIC is
 * down here and the receiver was told so (told_down), they were neither asked for nor
 * refused in this group, nor moved, and nothing of the group went on them. Announced or
 * not: nothing goes on a lane until the sender posts there, so it can vouch that nothing
 * was sent. None unless a lane of the group that is up here and announced can take them.
 */
/* Buffers of group g that went out on its lane: used there, with a part posted (a buffer
 * with none there is marked used all the same, and nothing was sent). */
static uint32_t lane_sent_bufs(const struct ofi_group *g)
{
	uint32_t posted = 0;

	for (uint32_t i = 0; i < g->ann.n && i < BRAID_MAX_RECVS; i++)
		if (g->ann.e[i].flags & OFI_PART_POSTED)
			posted |= 1u << i;
	return g->used & posted;
}

uint32_t ofi_move_lost(const struct ofi_comm *c, uint32_t want, uint32_t in)
{
	uint32_t slot = c->seq % OFI_MAX_INFLIGHT, lost = want & c->told_down;

	if (!c->move_on || !(want & in & ~c->told_down))
		return 0;
	if (c->move_seq == c->seq)
		lost &= ~(c->move_asked | c->move_refused);
	for (int k = 0; k < c->nlanes; k++) {
		const struct ofi_group *g = &c->lane[k].ring[slot];

		if ((lost >> k & 1) && (g->via || ((in >> k & 1) && lane_sent_bufs(g))))
			lost &= ~(1u << k);
	}
	return lost;
}

void ofi_move_ask(struct ofi_comm *c, uint64_t now)
{
	struct ofi_move_req m = { .magic = OFI_MOVE_REQ_MAGIC, .seq = c->seq };
	uint32_t want, in, lost;
	int rc;

	if (c->move_seq != c->seq) {
		c->move_seq = c->seq;
		c->move_asked = c->move_done = c->move_refused = 0;
	}
	if (c->move_asked & ~(c->move_done | c->move_refused) && !ofi_move_awaited(c, now)) {
		/* No answer within the bound (a peer of an older braid ignores the ask): the
		 * lanes stay hidden, for an answer that comes late may have cancelled their
		 * receives; fail as the NIC's bound would have. */
		BRAID_WARN("ofi: send comm to %s: the receiver did not answer the ask to move "
			   "group %u's parts off lanes %#x (NICs down here) within %lld ms "
			   "(BRAID_OFI_DOWN_TIMEOUT_MS); the comm fails with %d request(s) in flight",
			   c->peer, c->seq, c->move_asked & ~(c->move_done | c->move_refused),
			   (long long)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS), c->inflight);
		braid_judge_comm_fail(&c->error, ncclSystemError, c->ctr, c->lane[0].dev->ctr);
		return;
	}
	/* told so: ofi_live_send_lanes, just before */
	if (!ofi_send_group(c, &want, &in) || !(lost = ofi_move_lost(c, want, in)))
		return;
	m.lanes = lost;
	rc = braid_link_send(c->link, &m, sizeof(m));
	if (rc) {
		BRAID_INFO(NCCL_NET, "ofi: send comm to %s: asking to move group %u: %s", c->peer,
			   c->seq, strerror(-rc));
		return; /* again at the next look */
	}
	c->move_asked |= lost;
	c->move_ask_ns = now;
	BRAID_INFO(NCCL_NET,
		   "ofi: send comm to %s: nothing of group %u went on lanes %#x (announced there: "
		   "%#x), whose NICs are down here: asked the receiver to move their parts",
		   c->peer, c->seq, lost, in & lost);
}

void ofi_move_cut_send(struct ofi_comm *c, struct ofi_req *r, uint32_t slot)
{
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_op *op = ofi_req_sop(r, k);
		uint32_t via = c->lane[k].ring[slot].via;

		if (!via || (r->skip >> k & 1) || !(r->lanes >> k & 1))
			continue;
		op->type = OFI_OP_SEND_MOVED;
		op->from = (uint8_t)k;
		op->lane = (uint8_t)(via - 1);
		op->l = &c->lane[via - 1];
		r->moved |= (uint8_t)(1u << k);
		r->noted |= (uint8_t)(1u << k); /* its time is lane via's: no sample of lane k */
		/* nothing goes on lane k: its post finds it done, and marks the buffer used
		 * there (r is not posted yet: no completion reads it) */
		r->l[k].posted = 1;
	}
}

/* Post under `lk`'s ep_lock, retrying "not now" for at most OFI_MOVE_POST_MS while the
 * device moves: a moved part has no backlog to wait in (its lane's is its own part's). */
static int post_retrying(struct ofi_lane *lj,
			 int (*post)(struct ofi_lane *, struct ofi_req *, int, int),
			 struct ofi_req *r, int k, int i)
{
	uint64_t until = braid_now_ns() + OFI_MOVE_POST_MS * 1000000ULL;
	int rc;

	while ((rc = post(lj, r, k, i)) == -FI_EAGAIN && braid_now_ns() < until) {
		ofi_dev_progress(lj->dev);
		pthread_mutex_unlock(&lj->dev->ep_lock);
		sched_yield();
		pthread_mutex_lock(&lj->dev->ep_lock);
	}
	return rc;
}

static int post_send(struct ofi_lane *lj, struct ofi_req *r, int k, int i)
{
	(void)i;
	return ofi_post_moved_send(lj, r, k);
}

int ofi_move_post_send(struct ofi_comm *c, struct ofi_req *r)
{
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *lj = ofi_req_sop(r, k)->l;
		int rc;

		if (!(r->moved >> k & 1))
			continue;
		pthread_mutex_lock(&lj->dev->ep_lock);
		rc = post_retrying(lj, post_send, r, k, 0);
		pthread_mutex_unlock(&lj->dev->ep_lock);
		if (rc) {
			BRAID_WARN("ofi: send comm to %s: the part of buffer %llu moved from lane %d "
				   "to NIC %s (lane %u): posting failed: %s",
				   c->peer, (unsigned long long)r->first, k, lj->dev->name, lj->k,
				   ofi_strerror(rc));
			return rc;
		}
	}
	return 0;
}

/*
 * The receiver moved (or refused to move) lane m->from's parts of group m->seq: the
 * current group, asked for; or unasked, the receiver's own NIC on that lane down
 * (ofi_move_own), any group of the window whose lane-`from` announcement never left.
 */
static void moved_take(struct ofi_comm *c, const struct ofi_moved *m, uint32_t len)
{
	uint32_t bit = m->from < c->nlanes ? 1u << m->from : 0, seq = m->seq, want, in;
	const struct ofi_group *other = ofi_send_group(c, &want, &in);
	int asked = seq == c->move_seq && c->move_seq == c->seq && (c->move_asked & bit) &&
		    !(c->move_done & bit);
	struct ofi_lane *l = bit ? &c->lane[m->from] : NULL;
	struct ofi_group *g;

	/* A refusal for a lane whose move was taken already (an unasked MOVED crossed the
	 * ask), or for a group sent already: the receiver read the ask late; nothing to do. */
	if (bit && len >= OFI_MOVED_HEAD && !m->ok && !asked &&
	    ((int32_t)(seq - c->seq) < 0 || (seq == c->move_seq && (c->move_done & bit)))) {
		BRAID_INFO(NCCL_NET,
			   "ofi: send comm to %s: a late refusal to move group %u's "
			   "parts off lane %u, already moved or sent: ignored",
			   c->peer, seq, m->from);
		return;
	}
	/* what it says of the group agrees with the group's announcement on its other lanes */
	if (!bit || len < OFI_MOVED_HEAD + ofi_announce_len(0) || m->ann.n < 1 ||
	    m->ann.n > BRAID_MAX_RECVS || len != OFI_MOVED_HEAD + ofi_announce_len(m->ann.n) ||
	    m->ann.seq != seq || (!m->ok && !asked) ||
	    (m->ok &&
	     (m->via >= c->nlanes || m->from == m->via || seq - c->seq >= OFI_MAX_INFLIGHT ||
	      (OFI_KIND_LANES(m->ann.kind) && /* both lanes the group's */
	       (~OFI_KIND_LANES(m->ann.kind) & (bit | 1u << m->via))) ||
	      (seq == c->seq && other &&
	       (other->ann.n != m->ann.n || other->ann.first != m->ann.first)) ||
	      (asked && !other)))) {
		BRAID_WARN("ofi: send comm to %s: protocol error: a MOVED message (%u bytes, "
			   "group %u, lane %u to %u) not asked for (group %u, asked lanes %#x)",
			   c->peer, len, seq, m->from, m->via, c->seq, c->move_asked);
		braid_judge_comm_fail(&c->error, ncclRemoteError, c->ctr, c->lane[0].dev->ctr);
		return;
	}
	if (!m->ok) { /* nothing moved: wait for the lane's own announcement, as before */
		c->move_asked &= ~bit;
		c->move_refused |= bit; /* asked once per group and lane */
		BRAID_INFO(NCCL_NET,
			   "ofi: send comm to %s: the receiver could not move group %u's parts off "
			   "lane %u: they wait for its NIC",
			   c->peer, seq, m->from);
		return;
	}
	g = &l->ring[seq % OFI_MAX_INFLIGHT];
	pthread_mutex_lock(&l->dev->ep_lock);
	if (!asked && (__atomic_load_n(&g->arrived, __ATOMIC_RELAXED) || g->via ||
		       seq - l->seq >= OFI_MAX_INFLIGHT)) {
		/* unasked, for a lane whose announcement did come, or moved already */
		pthread_mutex_unlock(&l->dev->ep_lock);
		BRAID_WARN("ofi: send comm to %s: protocol error: a MOVED message for group %u "
			   "lane %u, whose announcement is in or which moved already",
			   c->peer, seq, m->from);
		braid_judge_comm_fail(&c->error, ncclRemoteError, c->ctr, c->lane[0].dev->ctr);
		return;
	}
	if (!__atomic_load_n(&g->arrived, __ATOMIC_RELAXED)) {
		g->ann = m->ann;
		g->used = 0;
	}
	g->via = (uint32_t)m->via + 1;
	l->nmoved++; /* its own announcement may come once the NIC is back: dropped then */
	__atomic_store_n(&g->arrived, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&l->dev->ep_lock);
	if (seq == c->seq) {
		if (c->move_seq != seq) {
			c->move_seq = seq;
			c->move_asked = c->move_done = c->move_refused = 0;
		}
		c->move_done |= bit;
	}
	braid_log(move_level(c, m->from), NCCL_NET, __FILE__, __LINE__,
		  "ofi: send comm to %s: NIC %s (lane %u of %d) %s: the receiver moved its parts "
		  "of group %u (%u buffer(s)) to NIC %s (lane %u), where they go; nothing had "
		  "been sent on it",
		  c->peer, l->dev->name, m->from, c->nlanes,
		  asked ? "is down here" : "is down at the receiver", seq, m->ann.n,
		  c->lane[m->via].dev->name, m->via);
}

/* ---- receiver ---- */

struct moving {
	const struct ofi_req *r;
	int k;
	uint32_t bufs;
};

/* A left() for ofi_dev_reap: the receives being cancelled that are not back yet. */
static int moving_left(const struct ofi_dev *d, const void *arg)
{
	const struct moving *a = arg;
	const struct ofi_recv_part *recv = ofi_req_recv((struct ofi_req *)a->r);
	int n = 0;

	(void)d;
	for (int i = 0; i < a->r->n; i++)
		n += (a->bufs >> i & 1) && recv->rl[a->k].op[i].type == OFI_OP_RECV_MOVING;
	return n;
}

static int post_recv(struct ofi_lane *lj, struct ofi_req *r, int k, int i)
{
	return ofi_post_moved_recv(lj, r, k, i);
}

/*
 * Move r's parts on lane k to lane j: cancel k's receives, reap them, post them on j.
 * What still waits in k's backlog (its announcement, which tcp;ofi_rxm does not take
 * while it cannot connect over the NIC down at the peer; receives past a full queue) is
 * dropped, never posted. 1: refused, nothing moved (a part is in already: the sender has
 * sent on k); 0: moved; -1: the comm failed (a receive that did not come back within the
 * bound, or a post on j that failed).
 */
static int move_lane(struct ofi_comm *c, struct ofi_req *r, int k, int j, int unannounced)
{
	struct ofi_recv_part *recv = ofi_req_recv(r);
	struct ofi_lane *lk = &c->lane[k], *lj = &c->lane[j];
	struct moving a = { .r = r, .k = k };
	int left, posted, room, rc = 0;

	for (int i = 0; i < r->n; i++)
		if (recv->rl[k].ann.e[i].flags & OFI_PART_POSTED)
			a.bufs |= 1u << i;
	/* lane j takes them all now, or nothing is cancelled (its queue full: refused) */
	pthread_mutex_lock(&lj->dev->ep_lock);
	room = !lj->dev->rx_cap ||
	       lj->dev->rx_posted + (uint32_t)__builtin_popcount(a.bufs) <= lj->dev->rx_cap;
	pthread_mutex_unlock(&lj->dev->ep_lock);
	if (!room)
		return 1;
	pthread_mutex_lock(&lk->dev->ep_lock);
	posted = r->l[k].posted;
	if (r->l[k].failed || (r->l[k].done_mask & a.bufs & ((1u << posted) - 1)) ||
	    (unannounced && posted >= r->n + 1)) { /* unasked: the sender may send on k */
		pthread_mutex_unlock(&lk->dev->ep_lock);
		return 1;
	}
	if (posted < r->n + 1) {
		ofi_lane_backlog_drop(lk, r);
		r->l[k].posted = (uint8_t)(r->n + 1);
	}
	for (int i = 0; i < r->n; i++) {
		if (!(a.bufs >> i & 1))
			continue;
		if (i >= posted) { /* never posted on k */
			recv->rl[k].op[i].type = OFI_OP_RECV_MOVED;
			r->l[k].done_mask |= (uint8_t)(1u << i);
			continue;
		}
		recv->rl[k].op[i].type = OFI_OP_RECV_MOVING;
		recv->rl[k].op[i].from = (uint8_t)k;
		fi_cancel(&lk->dev->ep->fid, &recv->rl[k].op[i].fictx);
	}
	left = ofi_dev_reap(lk->dev, moving_left, &a, 1, &rc);
	pthread_mutex_unlock(&lk->dev->ep_lock);
	if (left || rc) {
		BRAID_WARN("ofi: receive comm from %s: moving group %u's parts off NIC %s (lane "
			   "%d): %d receive(s) not back from their cancel%s%s; the comm fails",
			   c->peer, recv->rl[k].ann.seq, lk->dev->name, k, left, rc ? ": " : "",
			   rc ? ofi_strerror(rc) : "");
		return -1;
	}
	r->moved |= (uint8_t)(1u << k);
	pthread_mutex_lock(&lj->dev->ep_lock);
	for (int i = 0; i < r->n && !rc; i++) {
		struct ofi_op *op = &recv->rl[k].op[i];

		if (!(a.bufs >> i & 1))
			continue;
		if (op->type != OFI_OP_RECV_MOVED) { /* it matched on lane k after all */
			recv->rl[k].ann.e[i].flags &= ~OFI_PART_POSTED; /* nothing to send again */
			continue;
		}
		op->from = (uint8_t)k;
		op->lane = (uint8_t)j;
		op->l = lj;
		rc = post_retrying(lj, post_recv, r, k, i);
	}
	pthread_mutex_unlock(&lj->dev->ep_lock);
	if (rc) {
		BRAID_WARN("ofi: receive comm from %s: moving group %u's parts off NIC %s (lane "
			   "%d) to NIC %s (lane %d): posting failed: %s; the comm fails",
			   c->peer, recv->rl[k].ann.seq, lk->dev->name, k, lj->dev->name, j,
			   ofi_strerror(rc));
		return -1;
	}
	return 0;
}

static struct ofi_req *group_req(struct ofi_comm *c, uint32_t seq)
{
	for (uint32_t i = 0; i < c->reqs.nelem; i++) {
		struct ofi_req *r = braid_pool_at(&c->reqs, i);

		if (braid_pool_is_used(&c->reqs, i) && r->magic == BRAID_MAGIC_REQ && !r->is_send &&
		    ofi_req_recv(r)->rl[0].ann.seq == seq)
			return r;
	}
	return NULL;
}

static void moved_reply(struct ofi_comm *c, struct ofi_req *r, uint32_t seq, int k, int j, int ok)
{
	struct ofi_moved m = { .magic = OFI_MOVED_MAGIC,
			       .seq = seq,
			       .from = (uint8_t)k,
			       .via = (uint8_t)(j < 0 ? 0 : j),
			       .ok = (uint8_t)ok };
	uint32_t len;
	int rc;

	if (r) {
		m.ann = ofi_req_recv(r)->rl[k].ann;
	} else { /* a group this side has none of: an empty announcement of one buffer */
		m.ann.seq = seq;
		m.ann.n = 1;
	}
	len = (uint32_t)(OFI_MOVED_HEAD + ofi_announce_len(m.ann.n));
	rc = braid_link_send(c->link, &m, len);
	if (rc) {
		/* the sender waits for an answer that never comes: fail now, not at its bound */
		BRAID_WARN("ofi: receive comm from %s: answering the sender's ask to move group "
			   "%u: %s; the comm fails",
			   c->peer, seq, strerror(-rc));
		braid_judge_comm_fail(&c->error, ncclSystemError, c->ctr, c->lane[0].dev->ctr);
	}
}

/* A move half done (parts cancelled, the answer not sent) leaves nothing either side can
 * finish: the comm fails, and the peer hears why over the link at once. */
static void move_failed(struct ofi_comm *c, const char *why)
{
	braid_judge_comm_fail(&c->error, ncclSystemError, c->ctr, c->lane[0].dev->ctr);
	braid_link_report_error(c->link, ncclSystemError, why);
}

/* The first lane of live whose NIC is not down here, where another lane's parts can go;
 * -1 if none. */
static int move_target(const struct ofi_comm *c, uint32_t live)
{
	for (; live; live &= live - 1) {
		int j = __builtin_ctz(live);

		if (!ofi_dev_link_down(c->lane[j].dev))
			return j;
	}
	return -1;
}

static void move_serve(struct ofi_comm *c, const struct ofi_move_req *q)
{
	struct ofi_req *r = group_req(c, q->seq);

	/* A group posted here and gone is complete: every part came, so the sender was
	 * answered (an unasked MOVED crossed its ask) and waits for nothing. */
	if (!r && (int32_t)(q->seq - c->seq) < 0) {
		BRAID_INFO(NCCL_NET,
			   "ofi: receive comm from %s: the ask to move group %u came "
			   "after the group completed: no answer",
			   c->peer, q->seq);
		return;
	}
	for (int k = 0; k < c->nlanes; k++) {
		/* not onto a lane whose NIC is down here, nor one its parts moved off */
		int j = r ? move_target(c, r->lanes & ~q->lanes & ~c->peer_down & ~r->moved) : -1;
		int rc = 1;

		/* moved unasked already (ofi_move_own, both ends' NICs down): that MOVED,
		 * ahead on the link, answers; a refusal after it would be a protocol error */
		if (!(q->lanes >> k & 1) || (r && (r->moved >> k & 1)))
			continue;
		if (r && j >= 0 && (r->lanes >> k & 1) && c->error == ncclSuccess)
			rc = move_lane(c, r, k, j, 0);
		if (rc < 0) { /* some may be cancelled already: no answer the sender could use */
			move_failed(c, "moving a group's parts off a NIC down on the sender's "
				       "side failed at the receiver");
			return;
		}
		moved_reply(c, r, q->seq, k, j, rc == 0);
		/* the sender asks for its next group as soon as this one is sent: look at the
		 * link at every tick for a while (check_request) */
		c->move_ask_ns = braid_now_ns() + 2000000000ULL;
		if (rc)
			continue;
		braid_log(move_level(c, k), NCCL_NET, __FILE__, __LINE__,
			  "ofi: receive comm from %s: the sender's NIC on lane %d is down: group "
			  "%u's parts on NIC %s (lane %d of %d) moved to NIC %s (lane %d) before "
			  "anything of them was sent",
			  c->peer, k, q->seq, c->lane[k].dev->name, k, c->nlanes,
			  c->lane[j].dev->name, j);
	}
}

/*
 * Receiver: lanes whose announcement found this side's own NIC down (ofi_post.c sets
 * own_moves). A group posted with parts on such a lane k whose lane-k announcement never
 * left has had nothing sent on k, so its parts there move to the group's lowest other lane
 * whose NIC is up on both sides, unasked, and the sender is told (MOVED). In NCCL a
 * receive can be posted in the moment after a NIC went down and before this side read it
 * down; the sender, whose NIC there is up, would never ask. A group with no such lane
 * waits (and fails at the bound).
 */
void ofi_move_own(struct ofi_comm *c)
{
	uint32_t lanes = __atomic_exchange_n(&c->own_moves, 0, __ATOMIC_RELAXED);

	for (int k = 0; k < c->nlanes && c->move_on && c->error == ncclSuccess; k++) {
		for (uint32_t i = 0; (lanes >> k & 1) && i < c->reqs.nelem; i++) {
			struct ofi_req *r = braid_pool_at(&c->reqs, i);
			int j, rc;

			if (!braid_pool_is_used(&c->reqs, i) || r->magic != BRAID_MAGIC_REQ ||
			    r->is_send || !(r->lanes >> k & 1) || (r->moved >> k & 1))
				continue;
			j = move_target(c, r->lanes & ~(1u << k) & ~c->peer_down & ~r->moved);
			if (j < 0 || (rc = move_lane(c, r, k, j, 1)) > 0)
				continue;
			if (rc < 0) {
				move_failed(c, "moving a group's parts off a NIC down at the "
					       "receiver failed");
				return;
			}
			moved_reply(c, r, ofi_req_recv(r)->rl[k].ann.seq, k, j, 1);
			braid_log(move_level(c, k), NCCL_NET, __FILE__, __LINE__,
				  "ofi: receive comm from %s: NIC %s (lane %d of %d) is down here: "
				  "group %u's parts on it moved to NIC %s (lane %d) before their "
				  "announcement left",
				  c->peer, c->lane[k].dev->name, k, c->nlanes,
				  ofi_req_recv(r)->rl[k].ann.seq, c->lane[j].dev->name, j);
		}
	}
}

/* ---- the link ---- */

static void move_on_msg(void *arg, const void *msg, uint32_t len)
{
	struct ofi_comm *c = arg;
	uint32_t magic = 0;

	if (len >= sizeof(magic))
		memcpy(&magic, msg, sizeof(magic));
	if (!c->is_send && ofi_live_take_word(c, msg, len))
		return;
	if (!c->is_send && magic == OFI_MOVE_REQ_MAGIC && len == sizeof(struct ofi_move_req)) {
		struct ofi_move_req q;

		memcpy(&q, msg, sizeof(q));
		move_serve(c, &q);
		return;
	}
	if (c->is_send && magic == OFI_MOVED_MAGIC && len <= sizeof(struct ofi_moved)) {
		struct ofi_moved m = { 0 };

		memcpy(&m, msg, len);
		moved_take(c, &m, len);
		return;
	}
	BRAID_INFO(NCCL_NET, "ofi: %s comm %s %s: a link message of %u bytes ignored",
		   ofi_comm_kind(c), c->is_send ? "to" : "from", c->peer, len);
}

void ofi_move_attach(struct ofi_comm *c)
{
	if (c->nlanes < 2)
		return;
	c->move_on = braid_param_int(BRAID_P_FAILOVER) != 0;
	c->link->msg_arg = c;
	c->link->on_msg = move_on_msg;
}
