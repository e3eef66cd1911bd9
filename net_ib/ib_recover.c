// SPDX-License-Identifier: Apache-2.0
/*
 * Recovery within a fused device: a NIC that failed over (ib_failover.c) comes back into
 * the comm once its port is ACTIVE again (BRAID_RECOVERY, on by default; docs/ib.md).
 *
 * NCCL 2.30.3's port recovery (p2p_resiliency_recovery.cc) is the reference: the failed
 * device's data QPs are drained, reset and brought back to RTS with their QP numbers, the
 * receiver posts its receives again, and the device rejoins. NCCL agrees on it with
 * "alive" messages over QPs of their own; here the two sides agree over the comm's TCP
 * link (plugin/link.c), and the data that follows is the proof: a path still broken fails
 * the NIC over again after the retry budget, and the next try waits longer.
 *
 * The sender drives it from its liveness tick, and the steps that follow run where the
 * link's messages and the markers come in: once per recovery, never per message.
 *   1. a failed rail whose port here is ACTIVE: its QPs to ERR, and a signaled marker
 *      posted on each. A QP completes in order, so once every marker is back (flushed),
 *      nothing of what the QPs held is left to come;
 *   2. the QPs RESET -> INIT, new PSNs; ASK {the QPs, the PSNs} over the link;
 *   3. the receiver checks its own ports (NO while one is down), moves its FIFO writes
 *      off those QPs, drains them the same way (a marker behind its FIFO writes; its
 *      receives are counted back until none is posted), resets them, brings them to RTS
 *      against the sender's PSNs, posts its receives, and answers OK {its PSNs};
 *   4. the sender brings its QPs to RTS and proves each one: an RDMA READ of a word of
 *      the receiver's (the failover probes' words) over it. A port can be ACTIVE while
 *      the path behind it is still broken; then a READ fails after the retry budget, and
 *      the NIC stays out, without a WARN;
 *   5. every READ back: the rail rejoins the stripe, and DONE tells the receiver.
 * No answer within RJ_ANSWER_NS, a NO, or a step that fails, and the sender tries again
 * later, waiting twice as long each time (up to RJ_WAIT_MAX_NS).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "net_ib/ib.h"
#include "net_ib/ib_fo.h"
#include "plugin/clock.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define RJ_MAGIC 0x6272726au /* "brrj" */
#define RJ_ANSWER_NS (5000ull * 1000000ull)
#define RJ_WAIT_FIRST_NS (200ull * 1000000ull)
#define RJ_WAIT_MAX_NS (5000ull * 1000000ull)

enum rj_type { RJ_ASK = 1, RJ_OK = 2, RJ_NO = 3, RJ_DONE = 4 };
enum rj_stage { RJ_IDLE = 0, RJ_DRAIN = 1, RJ_ASKED = 2, RJ_PROVING = 3 };

/* A recovery message over the link; numbers in network order. */
struct rj_msg {
	uint32_t magic;
	uint8_t type;
	uint8_t rail;   /* ASK: the sender's rail */
	uint16_t qmask; /* the QPs (the comm's QP numbering) reconnected */
	uint32_t attempt;
	uint32_t out_ms;          /* ASK, DONE: how long the sender's rail was (has been) out */
	uint32_t psn[IB_MAX_QPS]; /* ASK: the sender's new PSNs; OK: the receiver's */
	uint8_t soon;             /* NO: only a port of the receiver's still down: ask soon */
	char why[95];             /* NO */
} __attribute__((packed));

static void rj_on_msg(void *arg, const void *msg, uint32_t len);

void ib_rj_attach(struct ib_comm *c)
{
	c->rj = c->rj && c->fo;
	c->rj_rail = -1;
	c->rj_wait_ns = RJ_WAIT_FIRST_NS;
	if (!c->rj)
		return;
	c->link->on_msg = rj_on_msg;
	c->link->msg_arg = c;
}

/* The QPs of rail k, as a mask. */
static uint16_t rail_qmask(const struct ib_comm *c, int k)
{
	uint16_t m = 0;

	for (int i = 0; i < c->nqps; i++)
		if (c->qps[i].rail == k)
			m |= (uint16_t)(1u << i);
	return m;
}

/* The port is up, by its events and by asking the device (a system call on real NICs:
 * only from the liveness tick, while a rail is out). */
static int port_active(const struct ib_dev *d)
{
	struct ibv_port_attr pa;

	if (__atomic_load_n(&d->down_ns, __ATOMIC_ACQUIRE))
		return 0;
	memset(&pa, 0, sizeof(pa));
	return !ibv.query_port(d->hca->ctx, (uint8_t)d->port, &pa) && pa.state == IBV_PORT_ACTIVE;
}

static int qp_state(struct ib_comm *c, struct ib_qp *q, enum ibv_qp_state st, const char *name)
{
	struct ibv_qp_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	rc = ibv.modify_qp(q->qp, &a, IBV_QP_STATE);
	if (rc)
		BRAID_WARN("ib: recovery: %s comm %s %s: QP %#x on %s:%d to %s failed: %s",
			   ib_side(c), c->is_send ? "to" : "from", c->peer, q->qp->qp_num,
			   c->rails[q->rail].dev->name, c->rails[q->rail].dev->port, name,
			   strerror(rc));
	return -rc;
}

/* A signaled write of nothing on qp, moved to ERR first: it comes back flushed, behind all
 * the QP held. Its wr_id names what it drains (a data QP's struct ib_qp, a flush QP's
 * struct ib_rail), with the flush kind (ib_failover.c tells it from a request). 0 or the
 * verbs errno. */
static int post_marker(struct ibv_qp *qp, const void *names)
{
	struct ibv_qp_attr a;
	struct ibv_sge none = { 0 };
	struct ibv_send_wr wr, *bad;
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	rc = ibv.modify_qp(qp, &a, IBV_QP_STATE);
	if (rc)
		return rc;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ib_wr_id(names, IB_WR_FLUSH);
	wr.sg_list = &none;
	wr.num_sge = 0;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(qp, &wr, &bad);
}

/* One QP drained: its marker posted and counted, or a WARN naming it (what: "QP", "the
 * flush QP"); 0 or -errno. */
static int drain_qp(struct ib_comm *c, struct ibv_qp *qp, const void *names, const struct ib_dev *d,
		    const char *what)
{
	int rc = post_marker(qp, names);

	if (rc) {
		BRAID_WARN("ib: recovery: %s comm %s %s: draining %s %#x on %s:%d failed: %s",
			   ib_side(c), c->is_send ? "to" : "from", c->peer, what, qp->qp_num,
			   d->name, d->port, strerror(rc));
		return -rc;
	}
	c->rj_markers++;
	return 0;
}

/* Step 1 on either side: the QPs of mask to ERR, a marker behind what each holds. */
static int drain_start(struct ib_comm *c, uint16_t mask)
{
	for (int i = 0; i < c->nqps; i++) {
		struct ib_qp *q = &c->qps[i];
		int rc;

		if (!(mask >> i & 1))
			continue;
		c->rj_draining |= (uint16_t)(1u << i);
		rc = drain_qp(c, q->qp, q, c->rails[q->rail].dev, "QP");
		if (rc)
			return rc;
	}
	return 0;
}

/* The receiver's rails of the QPs of mask: their flush QPs (GPUDirect flushes) too, each
 * marker naming the rail. */
static int drain_flush_qps(struct ib_comm *c, uint16_t mask)
{
	for (int k = 0; k < c->nrails; k++) {
		struct ib_rail *rl = &c->rails[k];
		int rc;

		if (!rl->flush_qp || !(mask & rail_qmask(c, k)))
			continue;
		c->rj_flush_draining |= (uint8_t)(1u << k);
		rc = drain_qp(c, rl->flush_qp, rl, rl->dev, "the flush QP");
		if (rc)
			return rc;
	}
	return 0;
}

/* QPs of mask from any state to INIT; 0 or -errno (WARNed). */
static int reset_qps(struct ib_comm *c, uint16_t mask)
{
	for (int i = 0; i < c->nqps; i++) {
		struct ib_qp *q = &c->qps[i];
		int rc;

		if (!(mask >> i & 1))
			continue;
		rc = qp_state(c, q, IBV_QPS_RESET, "RESET");
		if (!rc)
			rc = ib_qp_to_init(c, q);
		if (!rc && q->ece_ok && ibv.set_ece(q->qp, &q->ece))
			q->ece_ok = 0; /* as set-up: a NIC that no longer takes it goes without */
		if (rc)
			return rc;
	}
	return 0;
}

/* QPs of mask, at INIT, to RTS against the peer's PSNs; 0 or -errno (WARNed). */
static int connect_qps(struct ib_comm *c, uint16_t mask, const uint32_t *rpsn, const uint32_t *lpsn)
{
	for (int i = 0; i < c->nqps; i++) {
		const struct ib_qp_path *p = &c->qpath[i];
		struct ib_qp *q = &c->qps[i];
		int rc;

		if (!(mask >> i & 1))
			continue;
		rc = ib_qp_connect(c, q, i, q->remote_qpn, rpsn[i], lpsn[i], &p->gid, p->lid,
				   (enum ibv_mtu)p->mtu);
		if (rc)
			return rc;
	}
	return 0;
}

/* "QP 0x.. -> remote QP 0x.., ..." for the QPs of mask. */
static void qp_list(const struct ib_comm *c, uint16_t mask, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < c->nqps && at < len; i++)
		if (mask >> i & 1)
			at += (size_t)snprintf(buf + at, len - at, "%sQP %#x -> remote QP %#x",
					       at ? ", " : "", c->qps[i].qp->qp_num,
					       c->qps[i].remote_qpn);
}

static void send_msg(struct ib_comm *c, struct rj_msg *m)
{
	int rc;

	m->magic = htonl(RJ_MAGIC);
	rc = braid_link_send(c->link, m, sizeof(*m));
	if (rc)
		BRAID_INFO(NCCL_NET,
			   "ib: recovery: %s comm %s %s: sending over the link failed: %s",
			   ib_side(c), c->is_send ? "to" : "from", c->peer, strerror(-rc));
}

static void make_psns(uint32_t *psn, uint16_t mask)
{
	for (int i = 0; i < IB_MAX_QPS; i++)
		if (mask >> i & 1)
			psn[i] = (uint32_t)braid_random_u64() & 0xffffff;
}

/* ---- the sender ---- */

/* This try is over; the next in rj_wait_ns, which doubles unless soon (the receiver's port
 * was not back yet: its event may just not have been read). */
static void give_up_at(struct ib_comm *c, const char *why, int soon)
{
	const struct ib_dev *d = c->rails[c->rj_rail].dev;
	uint64_t now = braid_now_ns();

	BRAID_INFO(NCCL_NET,
		   "ib: recovery: send comm to %s: NIC %s:%d not back yet: %s; next try in %.1f s",
		   c->peer, d->name, d->port, why, (double)c->rj_wait_ns / 1e9);
	c->rj_stage = RJ_IDLE;
	c->rj_rail = -1;
	c->rj_markers = 0;
	c->rj_next_ns = now + (soon ? RJ_WAIT_FIRST_NS : c->rj_wait_ns);
	if (!soon)
		c->rj_wait_ns = c->rj_wait_ns * 2 > RJ_WAIT_MAX_NS ? RJ_WAIT_MAX_NS
								   : c->rj_wait_ns * 2;
}

static void give_up(struct ib_comm *c, const char *why)
{
	give_up_at(c, why, 0);
}

/* Step 2: the drained QPs reset, and the receiver asked. */
static void ask(struct ib_comm *c)
{
	int k = c->rj_rail;
	uint16_t mask = rail_qmask(c, k);
	struct rj_msg m = { .type = RJ_ASK, .rail = (uint8_t)k, .qmask = htons(mask) };
	uint64_t now = braid_now_ns();

	c->rj_draining &= (uint16_t)~mask;
	if (reset_qps(c, mask)) {
		give_up(c, "resetting its QPs failed");
		return;
	}
	c->rj_clean |= (uint8_t)(1u << k);
	make_psns(c->psn, mask);
	c->rj_attempt++;
	m.attempt = htonl(c->rj_attempt);
	m.out_ms = htonl((uint32_t)((now - c->rail_down_ns[k]) / 1000000ull));
	for (int i = 0; i < IB_MAX_QPS; i++)
		m.psn[i] = htonl(c->psn[i]);
	send_msg(c, &m);
	c->rj_stage = RJ_ASKED;
	c->rj_deadline_ns = now + RJ_ANSWER_NS;
}

void ib_rj_tick(struct ib_comm *c, uint64_t now)
{
	/* Only an answer can fail to come: markers on a QP in ERR and proofs (within the
	 * retry budget) always come back, and a marker counted against a later try would
	 * let it reset QPs that still hold work. */
	if (c->rj_stage == RJ_ASKED && now >= c->rj_deadline_ns)
		give_up(c, "the peer did not answer within 5 s");
	if (c->rj_stage != RJ_IDLE || now < c->rj_next_ns || c->fo_busy)
		return;
	for (int k = 0; k < c->nrails; k++) {
		if (!(c->rail_dead >> k & 1) || !port_active(c->rails[k].dev))
			continue;
		c->rj_rail = (int8_t)k;
		c->rj_stage = RJ_DRAIN;
		c->rj_deadline_ns = now + RJ_ANSWER_NS;
		if (c->rj_clean >> k & 1) { /* drained and reset by an earlier try */
			ask(c);
		} else if (drain_start(c, rail_qmask(c, k))) {
			c->rj_draining &= (uint16_t)~rail_qmask(c, k);
			give_up(c, "draining its QPs failed");
		}
		return;
	}
	c->rj_next_ns = now + RJ_WAIT_FIRST_NS;
}

/* Step 5: every QP proved; the rail is back. */
static void rejoined(struct ib_comm *c)
{
	int k = c->rj_rail;
	struct ib_rail *rl = &c->rails[k];
	uint16_t mask = rail_qmask(c, k);
	struct rj_msg m = { .type = RJ_DONE,
			    .qmask = htons(mask),
			    .attempt = htonl(c->rj_attempt) };
	uint64_t now = braid_now_ns();
	uint32_t out_ms = (uint32_t)((now - c->rail_down_ns[k]) / 1000000ull);
	char qps[256];

	/* the receiver's WARN names the whole outage (the same figure), not the part of it
	 * before the ask */
	m.out_ms = htonl(out_ms);
	send_msg(c, &m);
	c->rail_dead &= (uint8_t) ~(1u << k);
	c->qp_err &= (uint16_t)~mask;
	c->rj_stage = RJ_IDLE;
	c->rj_rail = -1;
	c->rj_wait_ns = RJ_WAIT_FIRST_NS;
	c->rj_next_ns = now + RJ_WAIT_FIRST_NS;
	braid_stripe_lane_down(&c->stripe, k, 0);
	/* its QP lanes forget what the failed QPs had outstanding (it never completed) */
	for (int j = 0; c->qst && (c->qlanes_on >> k & 1) && j < c->qst[k].nlanes; j++) {
		braid_stripe_lane_down(&c->qst[k], j, 1);
		braid_stripe_lane_down(&c->qst[k], j, 0);
	}
	qp_list(c, mask, qps, sizeof(qps));
	BRAID_WARN("ib: recovery: send comm to %s: NIC %s:%d is back after %.1f s out, during "
		   "which %llu bytes went over the comm's other NIC(s): %s reconnected, and it "
		   "rejoins the stripe (BRAID_RECOVERY=on)",
		   c->peer, rl->dev->name, rl->dev->port, (double)out_ms / 1e3,
		   (unsigned long long)(ib_fo_other_bytes(c, k) - c->rail_down_bytes[k]), qps);
	if (rl->ctr)
		rl->ctr->recoveries++;
	if (c->ctr)
		c->ctr->recoveries++;
}

/* Step 4: the receiver's QPs are at RTS; ours follow, each proved by a READ. */
static void reconnect(struct ib_comm *c, const struct rj_msg *m)
{
	int k = c->rj_rail;
	uint16_t mask = rail_qmask(c, k);
	uint32_t rpsn[IB_MAX_QPS];

	for (int i = 0; i < IB_MAX_QPS; i++)
		rpsn[i] = ntohl(m->psn[i]);
	if (connect_qps(c, mask, rpsn, c->psn)) {
		give_up(c, "connecting its QPs failed");
		return;
	}
	c->rj_clean &= (uint8_t) ~(1u << k); /* work requests go on them from now on */
	c->rj_stage = RJ_PROVING;
	c->rj_failed = 0;
	for (int i = 0; i < c->nqps; i++) {
		struct ib_qp *q = &c->qps[i];
		uint32_t *w = &c->fo_probe[IB_FO_WORDS + i];

		if (!(mask >> i & 1))
			continue;
		if (ib_qp_post_rdma(q->qp, ib_wr_id(q, IB_WR_FLUSH), IBV_WR_RDMA_READ,
				    IBV_SEND_SIGNALED, w, sizeof(*w), c->fifo_mrs[k]->lkey,
				    c->rem_done_addr, c->rem_done_rkey[q->peer_rail])) {
			c->rj_failed = 1;
			break;
		}
		c->rj_markers++;
	}
	if (!c->rj_markers)
		give_up(c, "posting a READ over its QPs failed");
}

static void sender_take(struct ib_comm *c, const struct rj_msg *m)
{
	if (c->rj_stage != RJ_ASKED || ntohl(m->attempt) != c->rj_attempt)
		return; /* the answer to a try given up on */
	if (m->type == RJ_OK) {
		reconnect(c, m);
	} else {
		char why[sizeof(m->why) + 16];

		snprintf(why, sizeof(why), "the peer: %.*s", (int)sizeof(m->why), m->why);
		give_up_at(c, why, m->soon);
	}
}

/* ---- the receiver ---- */

static void answer_no(struct ib_comm *c, uint32_t attempt, int soon, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void answer_no(struct ib_comm *c, uint32_t attempt, int soon, const char *fmt, ...)
{
	struct rj_msg m = { .type = RJ_NO, .attempt = htonl(attempt), .soon = (uint8_t)soon };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m.why, sizeof(m.why), fmt, ap);
	va_end(ap);
	BRAID_INFO(NCCL_NET, "ib: recovery: receive comm from %s: not yet: %s", c->peer, m.why);
	send_msg(c, &m);
}

/* The QPs of mask, drained: reset, to RTS against the sender's PSNs, receives posted. */
static void receiver_finish(struct ib_comm *c)
{
	uint16_t mask = c->rj_draining;
	struct rj_msg m = { .type = RJ_OK, .qmask = htons(mask), .attempt = htonl(c->rj_attempt) };
	uint32_t lpsn[IB_MAX_QPS] = { 0 };
	uint8_t rails = 0;
	int rc;

	c->rj_draining = 0;
	make_psns(lpsn, mask);
	rc = reset_qps(c, mask);
	for (int k = 0; !rc && k < c->nrails; k++) {
		if (!(c->rj_flush_draining >> k & 1))
			continue;
		rc = ib_flush_restart(c, &c->rails[k]);
		if (!rc)
			c->flush_err &= (uint8_t) ~(1u << k);
	}
	c->rj_flush_draining = 0;
	for (int i = 0; i < c->nqps; i++)
		if (mask >> i & 1)
			c->qps[i].rq_reposts = IB_RQ_DEPTH; /* a reset QP holds no receive */
	if (!rc)
		rc = connect_qps(c, mask, c->rj_psn, lpsn);
	for (int i = 0; !rc && i < c->nqps; i++) {
		if (!(mask >> i & 1))
			continue;
		rails |= (uint8_t)(1u << c->qps[i].rail);
		rc = ib_qp_post_recvs(c, &c->qps[i], IB_RQ_DEPTH);
		if (!rc)
			c->qps[i].rq_reposts = 0;
	}
	if (rc) {
		/* back to INIT with nothing posted (a RESET drops the receives a partial post
		 * left, without completions): the count stays true for the next drain; the NIC
		 * is out here until then */
		reset_qps(c, mask);
		for (int i = 0; i < c->nqps; i++) {
			if (!(mask >> i & 1))
				continue;
			c->qps[i].rq_reposts = IB_RQ_DEPTH;
			c->rail_dead |= (uint8_t)(1u << c->qps[i].rail);
			c->qp_err |= (uint16_t)(1u << i);
		}
		answer_no(c, c->rj_attempt, 0, "reconnecting its QPs on %s failed: %s",
			  c->rails[c->qps[__builtin_ctz(mask)].rail].dev->name, strerror(-rc));
		return;
	}
	c->rail_dead &= (uint8_t)~rails;
	c->qp_err &= (uint16_t)~mask;
	c->rj_waiting = mask;
	for (int i = 0; i < IB_MAX_QPS; i++)
		m.psn[i] = htonl(lpsn[i]);
	send_msg(c, &m);
}

/* The sender proved the QPs we reconnected: the NIC is back. */
static void receiver_done(struct ib_comm *c, uint16_t mask)
{
	uint8_t rails = 0;
	char qps[256];

	if (mask != c->rj_waiting)
		return;
	c->rj_waiting = 0;
	for (int i = 0; i < c->nqps; i++)
		if (mask >> i & 1)
			rails |= (uint8_t)(1u << c->qps[i].rail);
	qp_list(c, mask, qps, sizeof(qps));
	for (int k = 0; k < c->nrails; k++) {
		struct ib_rail *rl = &c->rails[k];

		if (!(rails >> k & 1))
			continue;
		BRAID_WARN("ib: recovery: receive comm from %s: NIC %s:%d is back after %.1f s out "
			   "(as the sender counts): %s reconnected, and the peer's data comes over "
			   "it again (BRAID_RECOVERY=on)",
			   c->peer, rl->dev->name, rl->dev->port, (double)c->rj_out_ms / 1e3, qps);
		if (rl->ctr)
			rl->ctr->recoveries++;
	}
	if (c->ctr)
		c->ctr->recoveries++;
}

static void receiver_check_drained(struct ib_comm *c)
{
	if (!c->rj_draining || c->rj_markers)
		return;
	for (int i = 0; i < c->nqps; i++)
		if ((c->rj_draining >> i & 1) && c->qps[i].rq_reposts != IB_RQ_DEPTH)
			return; /* receives of it still to come back */
	receiver_finish(c);
}

/* A QP that carries FIFO writes, not in mask, on a live rail (-1: none). */
static int fifo_qp_outside(const struct ib_comm *c, uint16_t mask)
{
	for (int i = 0; i < c->nqps; i++)
		if (!(mask >> i & 1) && !(c->rail_dead >> c->qps[i].rail & 1))
			return i;
	return -1;
}

static void receiver_take(struct ib_comm *c, const struct rj_msg *m)
{
	uint16_t mask = ntohs(m->qmask);
	uint32_t attempt = ntohl(m->attempt);
	int rc;

	if (m->type == RJ_DONE) {
		if (attempt != c->rj_attempt)
			return; /* of a try this side answered again since */
		if (m->out_ms)  /* 0 from a sender that fills it only in its ask */
			c->rj_out_ms = ntohl(m->out_ms);
		receiver_done(c, mask);
		return;
	}
	if (m->type != RJ_ASK || !mask || mask >> c->nqps) {
		answer_no(c, attempt, 0, "a malformed ask (QPs %#x of %d)", mask, c->nqps);
		return;
	}
	for (int i = 0; i < c->nqps; i++) {
		const struct ib_dev *d = c->rails[c->qps[i].rail].dev;

		if (!(mask >> i & 1))
			continue;
		ib_async_poll(d->hca); /* an ACTIVE event not read yet */
		if (!port_active(d)) {
			answer_no(c, attempt, 1, "its NIC %s:%d here is down", d->name, d->port);
			return;
		}
	}
	for (int k = 0; k < c->nrails; k++) {
		uint16_t on_k = rail_qmask(c, k);

		/* a NIC here that also carries QPs of another of the sender's NICs (a sender
		 * with more NICs than this side): draining it would stall those */
		if ((on_k & mask) && (on_k & ~mask)) {
			answer_no(c, attempt, 0,
				  "its NIC %s:%d here also carries QPs %#x of the sender's other NICs",
				  c->rails[k].dev->name, c->rails[k].dev->port, on_k & ~mask);
			return;
		}
	}
	if (c->rj_draining && c->rj_draining != mask) {
		answer_no(c, attempt, 0, "busy with QPs %#x", c->rj_draining);
		return;
	}
	/* the same QPs still draining for an earlier try: this one is answered once drained */
	c->rj_attempt = attempt;
	c->rj_out_ms = ntohl(m->out_ms);
	for (int i = 0; i < IB_MAX_QPS; i++)
		c->rj_psn[i] = ntohl(m->psn[i]);
	if (c->rj_draining)
		return;
	if (mask >> c->fifo_qp & 1) {
		int j = fifo_qp_outside(c, mask);

		if (j < 0) {
			answer_no(c, attempt, 0, "no QP outside %#x for its FIFO writes", mask);
			return;
		}
		c->fifo_qp = j;
		c->rem_fifo_rkey = c->rem_fifo_rkeys[c->qps[j].peer_rail];
		c->fifo_src_mr = c->fifo_mrs[c->qps[j].rail];
	}
	rc = drain_start(c, mask);
	if (!rc)
		rc = drain_flush_qps(c, mask);
	if (rc) {
		/* some may be in ERR already: their NIC is out here until the next try, so
		 * their flushed work requests count as a failed NIC's */
		for (int i = 0; i < c->nqps; i++)
			if (mask >> i & 1) {
				c->rail_dead |= (uint8_t)(1u << c->qps[i].rail);
				c->qp_err |= (uint16_t)(1u << i);
			}
		c->rj_draining = 0;
		c->rj_flush_draining = 0;
		c->rj_markers = 0;
		answer_no(c, attempt, 0, "draining QPs %#x failed: %s", mask, strerror(-rc));
	}
}

/* ---- both ---- */

void ib_rj_wr_back(struct ib_comm *c, int ok)
{
	if (!c->rj_markers)
		return; /* of a try given up on */
	c->rj_failed |= (uint8_t)!ok;
	if (--c->rj_markers)
		return;
	if (!c->is_send) {
		receiver_check_drained(c);
	} else if (c->rj_stage == RJ_DRAIN) {
		ask(c);
	} else if (c->rj_stage == RJ_PROVING && c->rj_failed) {
		/* the QPs that failed are in ERR: the next try drains them again */
		give_up(c, "a READ over it to the peer failed: the path is still broken");
	} else if (c->rj_stage == RJ_PROVING) {
		rejoined(c);
	}
}

void ib_rj_recv_flushed(struct ib_comm *c)
{
	receiver_check_drained(c);
}

static void rj_on_msg(void *arg, const void *msg, uint32_t len)
{
	struct ib_comm *c = arg;
	struct rj_msg m;

	if (c->error)
		return;
	if (len != sizeof(m)) {
		BRAID_INFO(NCCL_NET, "ib: recovery: %s comm %s %s: a message of %u bytes ignored",
			   ib_side(c), c->is_send ? "to" : "from", c->peer, len);
		return;
	}
	memcpy(&m, msg, sizeof(m));
	if (ntohl(m.magic) != RJ_MAGIC)
		return;
	if (c->is_send)
		sender_take(c, &m);
	else
		receiver_take(c, &m);
}
