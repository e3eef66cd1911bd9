// SPDX-License-Identifier: MIT
/*
 * softverbs: the wire. One engine per process:
 *
 *  - a listening Unix stream socket in $SOFTVERBS_FABRIC/ep/ (its endpoint);
 *  - per RC QP, one outbound stream connection to the endpoint of the
 *    process owning the destination QP. It carries this QP's requests one
 *    way and the peer's responses (ACK, NAK, READ response) the other way,
 *    so each QP's traffic is reliable and in order, as RC promises;
 *  - an rx thread that poll()s every connection and applies each incoming
 *    message: payloads are read straight into the target MR or receive
 *    buffers, completions are generated, responses queued;
 *  - a tx thread that sends posted WRs and queued responses, writing
 *    payloads straight from registered memory.
 *
 * Deadlock freedom: the rx thread never writes to a socket (it only queues
 * responses), so it always drains; a blocked tx thread is therefore always
 * waiting on a peer's rx thread, which makes progress. All socket I/O has a
 * 10 s timeout, which reads as a dead path.
 *
 * Retransmission is go-back-N and only needed for RNR: after an RNR NAK the
 * responder drops requests until the NAKed PSN comes again, and the
 * requester rewinds its send pointer to the NAKed WR.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "tests/softverbs/sv_internal.h"

#define SV_SOCK_BUF (4 << 20)
#define SV_IO_TIMEOUT_S 10
#define SV_MAX_POLL 4096

struct sv_engine sv_eng = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.tx_cond = PTHREAD_COND_INITIALIZER,
	.idle_cond = PTHREAD_COND_INITIALIZER,
	.listen_fd = -1,
	.wake = { -1, -1 },
};

static void timed_wait(pthread_cond_t *cond, uint64_t until_ns)
{
	uint64_t now = sv_now_ns();
	uint64_t d = until_ns > now ? until_ns - now : 0;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	d += (uint64_t)ts.tv_nsec;
	ts.tv_sec += (time_t)(d / 1000000000ull);
	ts.tv_nsec = (long)(d % 1000000000ull);
	pthread_cond_timedwait(cond, &sv_eng.lock, &ts);
}

void sv_wake_rx(void)
{
	char b = 1;

	if (sv_eng.wake[1] >= 0 && write(sv_eng.wake[1], &b, 1) < 0 && errno != EAGAIN)
		sv_debug("wake pipe: %s", strerror(errno));
}

static void set_sock_opts(int fd)
{
	int buf = SV_SOCK_BUF;
	struct timeval tv = { .tv_sec = SV_IO_TIMEOUT_S };

	/* Root may exceed net.core.[rw]mem_max; others get what they get. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Connections: one ref for the engine list, one per other holder. */
static struct sv_conn *conn_new(int fd, bool outbound)
{
	struct sv_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->outbound = outbound;
	c->refs = 1;
	c->next = sv_eng.conns;
	sv_eng.conns = c;
	sv_wake_rx();
	return c;
}

void sv_conn_put(struct sv_conn *c)
{
	if (--c->refs == 0) {
		close(c->fd);
		free(c);
	}
}

/* Mark dead and shut the socket so any blocked I/O on it returns. */
void sv_conn_kill(struct sv_conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	shutdown(c->fd, SHUT_RDWR);
	sv_wake_rx();
}

/* Time between tries on a troubled path: one local ACK timeout. */
static uint64_t retry_interval(struct sv_qp *qp)
{
	uint64_t t = sv_qp_timeout_ns(&qp->attr) / (qp->attr.retry_cnt + 1u);

	if (t < 1000000)
		t = 1000000;
	if (t > 100000000)
		t = 100000000;
	return t;
}

/*
 * The requester's path failed (no connection, connection lost, responder not
 * ready or in ERR, PSN out of step). Like a transport retry: drop the
 * connection, go back to the oldest unacknowledged WR and try again after one
 * timeout; tx_pick() fails the WR once the whole retry budget has passed
 * since the trouble began with no response. Lock held.
 */
static void path_trouble(struct sv_qp *qp, const char *why)
{
	uint64_t now = sv_now_ns();

	if (!qp->retry_since_ns) {
		sv_debug("QP 0x%06x: path to QP 0x%06x: %s", qp->ibqp.qp_num,
			 qp->attr.dest_qp_num, why);
		qp->retry_since_ns = now;
	}
	qp->retry_at_ns = now + retry_interval(qp);
	qp->sq_send = qp->sq_head;
	if (qp->out) {
		sv_conn_kill(qp->out);
		sv_conn_put(qp->out);
		qp->out = NULL;
	}
	pthread_cond_broadcast(&sv_eng.tx_cond);
}

static void conn_lost(struct sv_conn *c)
{
	struct sv_qp *qp = c->qp;

	sv_conn_kill(c);
	if (c->outbound && qp && qp->out == c && !qp->destroyed)
		path_trouble(qp, "connection lost");
}

void sv_queue_resp(struct sv_conn *c, struct sv_hdr *h, void *data, struct sv_qp *qp)
{
	struct sv_resp *r = calloc(1, sizeof(*r));

	if (!r) {
		sv_log("out of memory queueing a response: dropping the connection");
		conn_lost(c);
		return;
	}
	h->magic = SV_WIRE_MAGIC;
	r->conn = c;
	r->hdr = *h;
	r->data = data;
	r->qp = qp;
	c->refs++;
	c->pending++;
	if (qp)
		qp->refs++;
	if (sv_eng.resp_tail)
		sv_eng.resp_tail->next = r;
	else
		sv_eng.resp_head = r;
	sv_eng.resp_tail = r;
	pthread_cond_broadcast(&sv_eng.tx_cond);
}

static void queue_simple(struct sv_conn *c, struct sv_qp *qp, uint8_t op, uint8_t nak,
			 uint32_t psn)
{
	struct sv_hdr h = { .op = op, .nak = nak, .psn = psn };

	if (qp) {
		h.src_qpn = qp->ibqp.qp_num;
		h.dst_qpn = qp->attr.dest_qp_num;
		h.rnr_timer = qp->attr.min_rnr_timer;
	}
	sv_queue_resp(c, &h, NULL, qp);
}

static bool op_has_payload(uint8_t op)
{
	return op == SV_OP_SEND || op == SV_OP_SEND_IMM || op == SV_OP_WRITE ||
	       op == SV_OP_WRITE_IMM || op == SV_OP_READ_RESP;
}

/* Read (lock dropped) a payload into iov; false if the connection failed. */
static bool read_payload(struct sv_conn *c, struct sv_qp *qp, struct iovec *iov, int n)
{
	int rc;

	qp->refs++;
	pthread_mutex_unlock(&sv_eng.lock);
	rc = sv_readv_full(c->fd, iov, n);
	pthread_mutex_lock(&sv_eng.lock);
	sv_qp_put(qp);
	if (rc) {
		conn_lost(c);
		return false;
	}
	return true;
}

static bool drain(struct sv_conn *c, const struct sv_hdr *h)
{
	int rc;

	if (!op_has_payload(h->op) || !h->len)
		return true;
	pthread_mutex_unlock(&sv_eng.lock);
	rc = sv_drain(c->fd, h->len);
	pthread_mutex_lock(&sv_eng.lock);
	if (rc) {
		conn_lost(c);
		return false;
	}
	return true;
}

static bool hello_matches(struct sv_qp *qp, const struct sv_hdr *h)
{
	const struct sv_port *p = &qp->ctx->dev->port[qp->attr.port_num - 1];

	if (qp->attr.qp_state != IBV_QPS_RTR && qp->attr.qp_state != IBV_QPS_RTS)
		return false;
	if (qp->attr.dest_qp_num != h->src_qpn || h->link_layer != p->link_layer)
		return false;
	if (!h->is_global)
		return h->lid == p->lid;
	for (int i = 0; i < p->ngids; i++)
		if (!memcmp(p->gid[i].raw, h->gid, 16))
			return true;
	return false;
}

static bool qp_ready(const struct sv_qp *qp)
{
	return qp->attr.qp_state == IBV_QPS_RTR || qp->attr.qp_state == IBV_QPS_RTS;
}

/* Bind an inbound connection to its QP. A QP that exists but is not yet
 * ready (RESET/INIT) is bound unverified: its requests are dropped (NAKed as
 * not ready) until it reaches RTR, as a real responder drops packets. */
static void on_hello(struct sv_conn *c, const struct sv_hdr *h)
{
	struct sv_qp *qp = sv_qp_find(h->dst_qpn);

	if (!qp || (qp_ready(qp) && !hello_matches(qp, h))) {
		sv_debug("hello for QP 0x%06x from QP 0x%06x rejected", h->dst_qpn, h->src_qpn);
		sv_conn_kill(c);
		return;
	}
	/* A QP has one inbound connection: a reconnect replaces the old one. */
	for (struct sv_conn *o = sv_eng.conns; o; o = o->next)
		if (o != c && !o->outbound && o->qp == qp)
			sv_conn_kill(o);
	c->qp = qp;
	c->hello = *h;
	c->verified = qp_ready(qp);
}

/* Responder error that moves the responder QP to ERR too. */
static void responder_error(struct sv_conn *c, struct sv_qp *qp, const struct sv_hdr *h,
			    uint8_t nak, enum ibv_event_type ev)
{
	if (!drain(c, h))
		return;
	queue_simple(c, qp, SV_OP_NAK, nak, h->psn);
	sv_async_event(qp->ctx, ev, &qp->ibqp, 0);
	sv_qp_to_error(qp);
}

static void responder_rnr(struct sv_conn *c, struct sv_qp *qp, const struct sv_hdr *h)
{
	if (!drain(c, h))
		return;
	c->rnr_wait = true;
	queue_simple(c, qp, SV_OP_NAK, SV_NAK_RNR, h->psn);
}

/* Check an rkey for a remote access; host pointer or NULL. */
static void *remote_target(struct sv_qp *qp, const struct sv_hdr *h, unsigned int need)
{
	struct sv_mr *mr;

	if (!(qp->attr.qp_access_flags & need))
		return NULL;
	if (sv_eng.cfg.fault_remote_access &&
	    ++sv_eng.nremote_ops == sv_eng.cfg.fault_remote_access) {
		sv_debug("fault: forcing a remote access error");
		return NULL;
	}
	mr = sv_mr_lookup(h->rkey);
	if (!mr || mr->ibmr.pd != qp->ibqp.pd || !(mr->access & need))
		return NULL;
	if (!h->len)
		return mr->ibmr.addr;
	return sv_mr_translate(mr, h->raddr, h->len, true);
}

/* Scatter list of a receive WR; -1: bad lkey, -2: too small. */
static int recv_iov(struct sv_qp *qp, const struct sv_rwqe *r, uint64_t len,
		    struct iovec *iov, int *n)
{
	uint64_t left = len;

	*n = 0;
	for (uint32_t i = 0; i < r->num_sge && left; i++) {
		const struct ibv_sge *s = &r->sge[i];
		uint64_t take = s->length < left ? s->length : left;
		struct sv_mr *mr = sv_mr_lookup(s->lkey);
		void *p;

		if (!mr || mr->ibmr.pd != qp->ibqp.pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE))
			return -1;
		p = sv_mr_translate(mr, s->addr, take, false);
		if (!p)
			return -1;
		iov[*n].iov_base = p;
		iov[*n].iov_len = take;
		(*n)++;
		left -= take;
	}
	return left ? -2 : 0;
}

static void count_rx(struct sv_qp *qp, uint64_t len)
{
	if (qp->stats) {
		__atomic_fetch_add(&qp->stats->rx_bytes, len, __ATOMIC_RELAXED);
		__atomic_fetch_add(&qp->stats->rx_msgs, 1, __ATOMIC_RELAXED);
	}
}

static void on_request(struct sv_conn *c, const struct sv_hdr *h)
{
	struct sv_qp *qp = c->qp;
	struct iovec iov[SV_MAX_SGE];
	struct sv_rwqe r;
	void *p;
	int n;

	if (!qp || qp->destroyed) {
		/* Unbound or being destroyed: ignore, the requester times out
		 * once the connection closes. */
		drain(c, h);
		return;
	}
	if (!qp_ready(qp)) {
		/* Not yet RTR, or in ERR: a real responder drops the packet. */
		if (drain(c, h))
			queue_simple(c, qp, SV_OP_NAK, SV_NAK_DEAD, h->psn);
		return;
	}
	if (!c->verified) {
		if (!hello_matches(qp, &c->hello)) {
			sv_debug("QP 0x%06x: requester QP 0x%06x does not match its path",
				 qp->ibqp.qp_num, h->src_qpn);
			sv_conn_kill(c);
			return;
		}
		c->verified = true;
	}
	if (h->psn != qp->resp_psn) {
		uint32_t d = (h->psn - qp->resp_psn) & 0xffffff;

		if (d >= 0x800000) {
			/* Duplicate (its response was lost with a connection):
			 * acknowledge again without applying; READs run again. */
			if (h->op != SV_OP_READ_REQ) {
				if (drain(c, h))
					queue_simple(c, qp, SV_OP_ACK, 0, h->psn);
				return;
			}
		} else {
			/* Ahead: a gap after an RNR NAK (go-back-N, dropped
			 * quietly) or PSNs that do not match (NAKed). */
			if (drain(c, h) && !c->rnr_wait) {
				sv_debug("QP 0x%06x: PSN %u, expected %u", qp->ibqp.qp_num, h->psn,
					 qp->resp_psn);
				queue_simple(c, qp, SV_OP_NAK, SV_NAK_SEQ, h->psn);
			}
			return;
		}
	} else {
		c->rnr_wait = false;
	}

	switch (h->op) {
	case SV_OP_WRITE:
	case SV_OP_WRITE_IMM:
		p = remote_target(qp, h, IBV_ACCESS_REMOTE_WRITE);
		if (!p) {
			responder_error(c, qp, h, SV_NAK_ACCESS, IBV_EVENT_QP_ACCESS_ERR);
			return;
		}
		if (h->op == SV_OP_WRITE_IMM && qp->rq_head == qp->rq_tail) {
			responder_rnr(c, qp, h);
			return;
		}
		iov[0].iov_base = p;
		iov[0].iov_len = h->len;
		if (!read_payload(c, qp, iov, 1))
			return;
		count_rx(qp, h->len);
		qp->resp_psn = (qp->resp_psn + 1) & 0xffffff;
		if (h->op == SV_OP_WRITE_IMM && qp->attr.qp_state != IBV_QPS_ERR &&
		    sv_qp_pop_recv(qp, &r))
			sv_qp_complete_recv(qp, &r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
					    (uint32_t)h->len, h);
		queue_simple(c, qp, SV_OP_ACK, 0, h->psn);
		return;
	case SV_OP_SEND:
	case SV_OP_SEND_IMM:
		if (!sv_qp_pop_recv(qp, &r)) {
			responder_rnr(c, qp, h);
			return;
		}
		switch (recv_iov(qp, &r, h->len, iov, &n)) {
		case -1:
			sv_qp_complete_recv(qp, &r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, NULL);
			responder_error(c, qp, h, SV_NAK_OP_ERR, IBV_EVENT_QP_FATAL);
			return;
		case -2:
			sv_qp_complete_recv(qp, &r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, NULL);
			responder_error(c, qp, h, SV_NAK_INV_REQ, IBV_EVENT_QP_FATAL);
			return;
		}
		if (!read_payload(c, qp, iov, n))
			return;
		count_rx(qp, h->len);
		qp->resp_psn = (qp->resp_psn + 1) & 0xffffff;
		if (qp->attr.qp_state != IBV_QPS_ERR)
			sv_qp_complete_recv(qp, &r, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)h->len, h);
		queue_simple(c, qp, SV_OP_ACK, 0, h->psn);
		return;
	case SV_OP_READ_REQ: {
		struct sv_hdr resp = {
			.op = SV_OP_READ_RESP, .psn = h->psn, .len = h->len,
			.src_qpn = qp->ibqp.qp_num, .dst_qpn = qp->attr.dest_qp_num,
		};

		p = remote_target(qp, h, IBV_ACCESS_REMOTE_READ);
		if (!p) {
			responder_error(c, qp, h, SV_NAK_ACCESS, IBV_EVENT_QP_ACCESS_ERR);
			return;
		}
		if (h->psn == qp->resp_psn)
			qp->resp_psn = (qp->resp_psn + 1) & 0xffffff;
		sv_queue_resp(c, &resp, p, qp);
		return;
	}
	default:
		sv_log("unknown request op %u from QP 0x%06x", h->op, h->src_qpn);
		conn_lost(c);
	}
}

/* Requester side: a response for the oldest outstanding WR of qp. */
static void on_response(struct sv_conn *c, const struct sv_hdr *h)
{
	struct sv_qp *qp = c->qp;
	struct sv_swqe *w;
	uint64_t head;

	if (!qp || qp->destroyed || qp->out != c || qp->attr.qp_state != IBV_QPS_RTS ||
	    qp->sq_head == qp->sq_send) {
		drain(c, h);
		return;
	}
	head = qp->sq_head;
	w = &qp->sq[head % qp->sq_size];
	if (w->psn != h->psn) {
		sv_debug("QP 0x%06x: response for PSN %u, expected %u", qp->ibqp.qp_num,
			 h->psn, w->psn);
		drain(c, h);
		return;
	}
	switch (h->op) {
	case SV_OP_ACK:
		if (w->opcode == IBV_WR_RDMA_READ)
			break;
		sv_qp_complete_send(qp, IBV_WC_SUCCESS);
		break;
	case SV_OP_READ_RESP: {
		struct iovec iov[SV_MAX_SGE];
		uint64_t left = h->len < w->len ? h->len : w->len;
		int n = 0;

		for (uint32_t i = 0; i < w->num_sge && left; i++) {
			struct sv_mr *mr = sv_mr_lookup(w->sge[i].lkey);
			uint64_t take = w->sge[i].length < left ? w->sge[i].length : left;
			void *p = mr ? sv_mr_translate(mr, w->sge[i].addr, take, false) : NULL;

			if (!p) {
				/* Deregistered under us: drop the data. */
				drain(c, h);
				sv_qp_complete_send(qp, IBV_WC_LOC_PROT_ERR);
				return;
			}
			iov[n].iov_base = p;
			iov[n++].iov_len = take;
			left -= take;
		}
		if (h->len > w->len) {
			drain(c, h);
			sv_qp_complete_send(qp, IBV_WC_LOC_LEN_ERR);
			return;
		}
		if (!read_payload(c, qp, iov, n))
			return;
		count_rx(qp, h->len);
		if (qp->attr.qp_state == IBV_QPS_RTS && qp->sq_head == head)
			sv_qp_complete_send(qp, IBV_WC_SUCCESS);
		break;
	}
	case SV_OP_NAK:
		switch (h->nak) {
		case SV_NAK_RNR:
			if (qp->attr.rnr_retry != 7 && qp->rnr_left-- <= 0) {
				sv_qp_complete_send(qp, IBV_WC_RNR_RETRY_EXC_ERR);
				break;
			}
			qp->sq_send = qp->sq_head;	/* go back N */
			qp->rnr_until_ns = sv_now_ns() + sv_rnr_delay_ns(h->rnr_timer);
			break;
		case SV_NAK_ACCESS:
			sv_qp_complete_send(qp, IBV_WC_REM_ACCESS_ERR);
			break;
		case SV_NAK_INV_REQ:
			sv_qp_complete_send(qp, IBV_WC_REM_INV_REQ_ERR);
			break;
		case SV_NAK_OP_ERR:
			sv_qp_complete_send(qp, IBV_WC_REM_OP_ERR);
			break;
		case SV_NAK_SEQ:
			path_trouble(qp, "PSN sequence error");
			break;
		default:
			path_trouble(qp, "responder not ready or in error");
			break;
		}
		break;
	default:
		sv_log("unknown response op %u", h->op);
		conn_lost(c);
		return;
	}
	pthread_cond_broadcast(&sv_eng.tx_cond);
}

/* One message from c. Called and returns with sv_eng.lock held. */
static void rx_one(struct sv_conn *c)
{
	struct sv_hdr h;
	int rc;

	pthread_mutex_unlock(&sv_eng.lock);
	rc = sv_read_full(c->fd, &h, sizeof(h));
	pthread_mutex_lock(&sv_eng.lock);
	if (rc || h.magic != SV_WIRE_MAGIC) {
		if (!rc)
			sv_log("bad message magic: dropping the connection");
		conn_lost(c);
		return;
	}
	if (c->dead) {
		drain(c, &h);
		return;
	}
	if (c->outbound)
		on_response(c, &h);
	else if (h.op == SV_OP_HELLO)
		on_hello(c, &h);
	else
		on_request(c, &h);
}

static void port_faults(uint64_t now, int *timeout_ms)
{
	long el = (long)((now - sv_eng.start_ns) / 1000000ull);
	long dn = sv_eng.cfg.fault_port_down_ms, up = sv_eng.cfg.fault_port_up_ms;

	if (dn >= 0 && !sv_eng.port_down_done) {
		if (el >= dn) {
			sv_eng.port_down_done = true;
			sv_debug("fault: ports down");
			sv_set_port_state(IBV_PORT_DOWN);
			pthread_cond_broadcast(&sv_eng.tx_cond);
		} else if (dn - el < *timeout_ms) {
			*timeout_ms = (int)(dn - el);
		}
	}
	if (up >= 0 && sv_eng.port_down_done && !sv_eng.port_up_done) {
		if (el >= up) {
			sv_eng.port_up_done = true;
			sv_debug("fault: ports up");
			sv_set_port_state(IBV_PORT_ACTIVE);
			pthread_cond_broadcast(&sv_eng.tx_cond);
		} else if (up - el < *timeout_ms) {
			*timeout_ms = (int)(up - el);
		}
	}
}

static void *rx_main(void *arg)
{
	static struct pollfd pfd[SV_MAX_POLL];
	static struct sv_conn *pc[SV_MAX_POLL];

	(void)arg;
	pthread_mutex_lock(&sv_eng.lock);
	while (!sv_eng.stop) {
		struct sv_conn **pp;
		int n = 2, timeout = 100;

		/* Reap dead connections (drop the list's reference). */
		for (pp = &sv_eng.conns; *pp;) {
			struct sv_conn *c = *pp;

			if (c->dead && !c->pending) {
				*pp = c->next;
				sv_conn_put(c);
			} else {
				pp = &c->next;
			}
		}
		pfd[0] = (struct pollfd){ .fd = sv_eng.listen_fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = sv_eng.wake[0], .events = POLLIN };
		for (struct sv_conn *c = sv_eng.conns; c && n < SV_MAX_POLL; c = c->next) {
			if (c->dead)
				continue;
			c->refs++;
			pc[n] = c;
			pfd[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
		}
		port_faults(sv_now_ns(), &timeout);
		pthread_mutex_unlock(&sv_eng.lock);

		poll(pfd, (nfds_t)n, timeout);
		if (pfd[1].revents & POLLIN) {
			char buf[256];

			while (read(sv_eng.wake[0], buf, sizeof(buf)) > 0)
				;
		}
		if (pfd[0].revents & POLLIN) {
			int fd = accept4(sv_eng.listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0) {
				set_sock_opts(fd);
				pthread_mutex_lock(&sv_eng.lock);
				if (!conn_new(fd, false))
					close(fd);
				pthread_mutex_unlock(&sv_eng.lock);
			}
		}
		pthread_mutex_lock(&sv_eng.lock);
		for (int i = 2; i < n; i++) {
			if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) && !pc[i]->dead)
				rx_one(pc[i]);
			sv_conn_put(pc[i]);
		}
	}
	pthread_mutex_unlock(&sv_eng.lock);
	return NULL;
}

/* ---- tx side ---- */

static int connect_endpoint(uint32_t dqpn, const struct sv_hdr *hello)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char ep[PATH_MAX];
	int fd;

	if (sv_qpn_endpoint(dqpn, ep, sizeof(ep)) || strlen(ep) >= sizeof(sa.sun_path)) {
		sv_debug("no QP 0x%06x in the fabric", dqpn);
		return -1;
	}
	memcpy(sa.sun_path, ep, strlen(ep) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	set_sock_opts(fd);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    sv_write_full(fd, hello, sizeof(*hello))) {
		sv_debug("connect to %s for QP 0x%06x: %s", ep, dqpn, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Open qp->out. Lock held on entry and exit, dropped while connecting. */
static void tx_connect(struct sv_qp *qp)
{
	const struct sv_port *p = &qp->ctx->dev->port[qp->attr.port_num - 1];
	struct sv_hdr hello = {
		.magic = SV_WIRE_MAGIC,
		.op = SV_OP_HELLO,
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->attr.dest_qp_num,
		.lid = qp->attr.ah_attr.dlid,
		.is_global = qp->attr.ah_attr.is_global,
		.link_layer = p->link_layer,
	};
	int fd;

	memcpy(hello.gid, qp->attr.ah_attr.grh.dgid.raw, 16);
	if (qp->link_cut) {
		path_trouble(qp, "link cut (fault injection)");
		return;
	}
	pthread_mutex_unlock(&sv_eng.lock);
	fd = connect_endpoint(hello.dst_qpn, &hello);
	pthread_mutex_lock(&sv_eng.lock);
	if (qp->destroyed || qp->attr.qp_state != IBV_QPS_RTS || qp->out) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fd < 0) {
		path_trouble(qp, "cannot connect");
		return;
	}
	qp->out = conn_new(fd, true);
	if (!qp->out) {
		close(fd);
		path_trouble(qp, "out of memory");
		return;
	}
	qp->out->qp = qp;
	qp->out->refs++;	/* qp->out's reference */
}

/* Local side of a WR: iovecs for its payload; false on a bad lkey. */
static bool local_iov(struct sv_qp *qp, struct sv_swqe *w, struct iovec *iov, int *n)
{
	*n = 0;
	if (w->send_flags & IBV_SEND_INLINE) {
		if (w->len) {
			iov[0].iov_base = w->inline_buf;
			iov[0].iov_len = w->len;
			*n = 1;
		}
		return true;
	}
	for (uint32_t i = 0; i < w->num_sge; i++) {
		struct sv_mr *mr = sv_mr_lookup(w->sge[i].lkey);
		void *p;

		if (!mr || mr->ibmr.pd != qp->ibqp.pd)
			return false;
		if (w->opcode == IBV_WR_RDMA_READ && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
			return false;
		p = sv_mr_translate(mr, w->sge[i].addr, w->sge[i].length, false);
		if (!p)
			return false;
		if (!w->sge[i].length)
			continue;
		iov[*n].iov_base = p;
		iov[*n].iov_len = w->sge[i].length;
		(*n)++;
	}
	return true;
}

static uint8_t wire_op(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return SV_OP_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return SV_OP_SEND_IMM;
	case IBV_WR_RDMA_WRITE:
		return SV_OP_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return SV_OP_WRITE_IMM;
	default:
		return SV_OP_READ_REQ;
	}
}

static bool cut_applies(struct sv_qp *qp)
{
	return sv_eng.cfg.fault_cut_bytes &&
	       (!sv_eng.cfg.fault_cut_qp || sv_eng.cfg.fault_cut_qp == qp->ordinal);
}

/* Truncate iov to at most max bytes. */
static int iov_trim(struct iovec *iov, int n, uint64_t max)
{
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len >= max) {
			iov[i].iov_len = max;
			return i + 1;
		}
		max -= iov[i].iov_len;
	}
	return n;
}

static void account_tx(struct sv_qp *qp, uint64_t bytes)
{
	if (qp->stats) {
		__atomic_fetch_add(&qp->stats->tx_bytes, bytes, __ATOMIC_RELAXED);
		__atomic_fetch_add(&qp->stats->tx_msgs, 1, __ATOMIC_RELAXED);
	}
	sv_stats_uplink_add(qp->uplink, bytes);
}

/* Send the WR at qp->sq_send. Lock held; qp pinned by the caller. */
static void tx_wqe(struct sv_qp *qp)
{
	struct iovec iov[SV_MAX_SGE + 1];
	struct sv_swqe *w = &qp->sq[qp->sq_send % qp->sq_size];
	struct sv_hdr h = {
		.magic = SV_WIRE_MAGIC,
		.op = wire_op(w->opcode),
		.flags = (w->send_flags & IBV_SEND_SOLICITED) ? SV_HDR_SOLICITED : 0,
		.psn = w->psn,
		.imm = w->imm,
		.rkey = w->rkey,
		.raddr = w->raddr,
		.len = w->len,
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->attr.dest_qp_num,
	};
	uint64_t payload = h.op == SV_OP_READ_REQ ? 0 : w->len, budget = UINT64_MAX;
	struct sv_conn *c;
	bool cut = false;
	int n, rc;

	if (!qp->out) {
		tx_connect(qp);
		return;	/* re-evaluated on the next pass */
	}
	if (!local_iov(qp, w, iov + 1, &n)) {
		/* Errors complete in order: wait for earlier WRs first. */
		if (qp->sq_head == qp->sq_send)
			sv_qp_complete_send(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	if (h.op == SV_OP_READ_REQ)
		n = 0;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	n++;
	if (cut_applies(qp)) {
		budget = sv_eng.cfg.fault_cut_bytes > qp->bytes_sent ?
			 sv_eng.cfg.fault_cut_bytes - qp->bytes_sent : 0;
		if (payload >= budget) {
			cut = true;
			n = iov_trim(iov, n, sizeof(h) + budget);
		}
	}
	qp->sq_send++;
	c = qp->out;
	c->refs++;
	pthread_mutex_unlock(&sv_eng.lock);

	sv_uplink_pace(qp->uplink, payload);
	rc = sv_writev_full(c->fd, iov, n);

	pthread_mutex_lock(&sv_eng.lock);
	qp->bytes_sent += payload < budget ? payload : budget;
	account_tx(qp, payload < budget ? payload : budget);
	if (cut) {
		sv_debug("fault: cutting QP 0x%06x after %llu bytes", qp->ibqp.qp_num,
			 (unsigned long long)qp->bytes_sent);
		qp->link_cut = true;
		conn_lost(c);
	} else if (rc) {
		conn_lost(c);
	}
	sv_conn_put(c);
}

static void tx_resp(struct sv_resp *r)
{
	struct iovec iov[2] = {
		{ .iov_base = &r->hdr, .iov_len = sizeof(r->hdr) },
		{ .iov_base = r->data, .iov_len = r->data ? r->hdr.len : 0 },
	};
	int n = r->data && r->hdr.len ? 2 : 1;
	uint64_t bytes = n == 2 ? r->hdr.len : 0;

	if (r->conn->dead)
		return;
	if (bytes && r->qp)
		sv_uplink_pace(r->qp->uplink, bytes);
	if (sv_writev_full(r->conn->fd, iov, n)) {
		pthread_mutex_lock(&sv_eng.lock);
		conn_lost(r->conn);
		pthread_mutex_unlock(&sv_eng.lock);
		return;
	}
	if (bytes && r->qp) {
		pthread_mutex_lock(&sv_eng.lock);
		account_tx(r->qp, bytes);
		pthread_mutex_unlock(&sv_eng.lock);
	}
}

static bool port_up(struct sv_qp *qp)
{
	return qp->attr.port_num &&
	       qp->ctx->dev->port[qp->attr.port_num - 1].state == IBV_PORT_ACTIVE;
}

/* Timeouts due now, and the QP whose next WR has waited longest. */
static struct sv_qp *tx_pick(uint64_t now, uint64_t *wake)
{
	struct sv_qp *best = NULL;
	uint64_t best_t = UINT64_MAX;

	for (struct sv_qp *qp = sv_eng.qps; qp; qp = qp->next) {
		if (qp->destroyed || qp->attr.qp_state != IBV_QPS_RTS)
			continue;
		if (!port_up(qp) && qp->sq_head < qp->sq_tail && !qp->retry_since_ns)
			path_trouble(qp, "port down");
		if (qp->retry_since_ns && qp->sq_head < qp->sq_tail) {
			uint64_t t0 = qp->sq[qp->sq_head % qp->sq_size].post_ns;
			uint64_t due = (t0 > qp->retry_since_ns ? t0 : qp->retry_since_ns) +
				       sv_qp_timeout_ns(&qp->attr);

			if (now >= due) {
				sv_qp_complete_send(qp, IBV_WC_RETRY_EXC_ERR);
				continue;
			}
			if (due < *wake)
				*wake = due;
		}
		if (!port_up(qp) || qp->sq_send >= qp->sq_tail)
			continue;
		if (now < qp->rnr_until_ns || now < qp->retry_at_ns) {
			uint64_t t = qp->rnr_until_ns > qp->retry_at_ns ? qp->rnr_until_ns :
									qp->retry_at_ns;

			if (t < *wake)
				*wake = t;
			continue;
		}
		if (qp->sq[qp->sq_send % qp->sq_size].post_ns < best_t) {
			best_t = qp->sq[qp->sq_send % qp->sq_size].post_ns;
			best = qp;
		}
	}
	return best;
}

static void *tx_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sv_eng.lock);
	while (!sv_eng.stop) {
		struct sv_resp *r = sv_eng.resp_head;
		uint64_t now, wake;
		struct sv_qp *qp;

		if (r) {
			sv_eng.resp_head = r->next;
			if (!sv_eng.resp_head)
				sv_eng.resp_tail = NULL;
			pthread_mutex_unlock(&sv_eng.lock);
			tx_resp(r);
			pthread_mutex_lock(&sv_eng.lock);
			r->conn->pending--;
			sv_conn_put(r->conn);
			if (r->qp)
				sv_qp_put(r->qp);
			free(r);
			continue;
		}
		now = sv_now_ns();
		wake = now + 100000000ull;
		qp = tx_pick(now, &wake);
		if (qp) {
			qp->refs++;
			tx_wqe(qp);
			sv_qp_put(qp);
			continue;
		}
		timed_wait(&sv_eng.tx_cond, wake);
	}
	pthread_mutex_unlock(&sv_eng.lock);
	return NULL;
}

/* ---- engine lifecycle ---- */

/*
 * fork(): the child has none of the engine's threads, so it must not believe
 * an engine runs. Like real verbs, inherited objects are unusable in the
 * child; it may open devices afresh. Its copies of the parent's sockets are
 * only closed (not shut down, which would cut the parent's connections) and
 * the parent's files are left alone.
 */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&sv_eng.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&sv_eng.lock);
}

static void atfork_child(void)
{
	for (struct sv_conn *c = sv_eng.conns; c; c = c->next)
		close(c->fd);
	if (sv_eng.listen_fd >= 0)
		close(sv_eng.listen_fd);
	for (int i = 0; i < 2; i++)
		if (sv_eng.wake[i] >= 0)
			close(sv_eng.wake[i]);
	if (sv_eng.stats)
		munmap(sv_eng.stats, sv_eng.stats_len);
	/* The parent's objects stay allocated but unreachable in the child. */
	sv_eng.conns = NULL;
	sv_eng.qps = NULL;
	sv_eng.resp_head = sv_eng.resp_tail = NULL;
	memset(sv_eng.mr_hash, 0, sizeof(sv_eng.mr_hash));
	sv_eng.stats = NULL;
	sv_eng.listen_fd = -1;
	sv_eng.wake[0] = sv_eng.wake[1] = -1;
	sv_eng.users = 0;
	sv_eng.nctx = 0;
	sv_eng.stop = false;
	pthread_mutex_init(&sv_eng.lock, NULL);
	pthread_cond_init(&sv_eng.tx_cond, NULL);
	pthread_cond_init(&sv_eng.idle_cond, NULL);
}

static void register_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static int engine_start(void)
{
	static int seq;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int n;

	pthread_once(&once, register_atfork);
	sv_config_load(&sv_eng.cfg);
	if (sv_fabric_init())
		return -1;
	n = snprintf(sv_eng.ep_path, sizeof(sv_eng.ep_path), "%s/ep/e%d.%d",
		     sv_eng.cfg.fabric, (int)getpid(), ++seq);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		sv_log("SOFTVERBS_FABRIC path too long for a Unix socket: %s", sv_eng.cfg.fabric);
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, sv_eng.ep_path, (size_t)n + 1);
	unlink(sv_eng.ep_path);
	sv_eng.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv_eng.listen_fd < 0 ||
	    bind(sv_eng.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(sv_eng.listen_fd, 512)) {
		sv_log("cannot listen on %s: %s", sv_eng.ep_path, strerror(errno));
		goto fail;
	}
	chmod(sv_eng.ep_path, 0777);
	if (pipe2(sv_eng.wake, O_CLOEXEC | O_NONBLOCK))
		goto fail;
	sv_stats_open();	/* stats are optional: go on without */
	sv_eng.next_key = (uint32_t)(sv_hash64(sv_now_ns() ^ (uint64_t)getpid()) & 0xffff) << 8;
	sv_eng.start_ns = sv_now_ns();
	sv_eng.nqp_created = 0;
	sv_eng.nreg = sv_eng.nremote_ops = 0;
	sv_eng.stop = false;
	if (pthread_create(&sv_eng.rx_thread, NULL, rx_main, NULL))
		goto fail;
	if (pthread_create(&sv_eng.tx_thread, NULL, tx_main, NULL)) {
		sv_eng.stop = true;
		pthread_mutex_unlock(&sv_eng.lock);
		pthread_join(sv_eng.rx_thread, NULL);
		pthread_mutex_lock(&sv_eng.lock);
		goto fail;
	}
	sv_debug("endpoint %s", sv_eng.ep_path);
	return 0;
fail:
	if (sv_eng.listen_fd >= 0) {
		close(sv_eng.listen_fd);
		unlink(sv_eng.ep_path);
	}
	sv_eng.listen_fd = -1;
	for (int i = 0; i < 2; i++) {
		if (sv_eng.wake[i] >= 0)
			close(sv_eng.wake[i]);
		sv_eng.wake[i] = -1;
	}
	sv_stats_close();
	return -1;
}

static void engine_stop(void)
{
	sv_eng.stop = true;
	pthread_cond_broadcast(&sv_eng.tx_cond);
	sv_wake_rx();
	pthread_mutex_unlock(&sv_eng.lock);
	pthread_join(sv_eng.rx_thread, NULL);
	pthread_join(sv_eng.tx_thread, NULL);
	pthread_mutex_lock(&sv_eng.lock);
	while (sv_eng.resp_head) {
		struct sv_resp *r = sv_eng.resp_head;

		sv_eng.resp_head = r->next;
		sv_conn_put(r->conn);
		free(r);
	}
	sv_eng.resp_tail = NULL;
	/* QPs the application left behind must not point at freed conns. */
	for (struct sv_qp *qp = sv_eng.qps; qp; qp = qp->next)
		qp->out = NULL;
	while (sv_eng.conns) {
		struct sv_conn *c = sv_eng.conns;

		sv_eng.conns = c->next;
		close(c->fd);
		free(c);	/* no other holder is left: threads are gone */
	}
	close(sv_eng.listen_fd);
	unlink(sv_eng.ep_path);
	sv_eng.listen_fd = -1;
	close(sv_eng.wake[0]);
	close(sv_eng.wake[1]);
	sv_eng.wake[0] = sv_eng.wake[1] = -1;
	sv_stats_close();
	sv_eng.port_down_done = sv_eng.port_up_done = false;
}

int sv_engine_get(struct sv_context *ctx)
{
	int rc = 0;

	pthread_mutex_lock(&sv_eng.lock);
	if (sv_eng.nctx >= (int)(sizeof(sv_eng.ctxs) / sizeof(sv_eng.ctxs[0]))) {
		errno = EMFILE;
		rc = -1;
	} else if (sv_eng.users == 0 && engine_start()) {
		rc = -1;
	} else {
		sv_eng.users++;
		sv_eng.ctxs[sv_eng.nctx++] = ctx;
	}
	pthread_mutex_unlock(&sv_eng.lock);
	return rc;
}

void sv_engine_put(struct sv_context *ctx)
{
	pthread_mutex_lock(&sv_eng.lock);
	for (int i = 0; i < sv_eng.nctx; i++) {
		if (sv_eng.ctxs[i] == ctx) {
			sv_eng.ctxs[i] = sv_eng.ctxs[--sv_eng.nctx];
			break;
		}
	}
	if (--sv_eng.users == 0)
		engine_stop();
	pthread_mutex_unlock(&sv_eng.lock);
}
