// SPDX-License-Identifier: MIT
/*
 * softverbs: connections and the helpers both wire threads share: socket
 * set-up, connection reference counts, the response queue, and the
 * requester's reaction to path trouble (the transport retry model).
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

void sv_wake_rx(void)
{
	char b = 1;

	if (sv_eng.wake[1] >= 0 && write(sv_eng.wake[1], &b, 1) < 0 && errno != EAGAIN)
		sv_debug("wake pipe: %s", strerror(errno));
}

void sv_set_sock_opts(int fd)
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
struct sv_conn *sv_conn_new(int fd, bool outbound)
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
void sv_path_trouble(struct sv_qp *qp, const char *why)
{
	uint64_t now = sv_now_ns();

	if (!qp->retry_since_ns) {
		sv_debug("QP 0x%06x: path to QP 0x%06x: %s", qp->ibqp.qp_num, qp->attr.dest_qp_num,
			 why);
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

void sv_conn_lost(struct sv_conn *c)
{
	struct sv_qp *qp = c->qp;

	sv_conn_kill(c);
	if (c->outbound && qp && qp->out == c && !qp->destroyed)
		sv_path_trouble(qp, "connection lost");
}

/* data, when not NULL, lies in mr, pinned by the caller: the response keeps the pin. */
void sv_queue_resp(struct sv_conn *c, struct sv_hdr *h, void *data, struct sv_mr *mr,
		   struct sv_qp *qp)
{
	struct sv_resp *r = calloc(1, sizeof(*r));

	if (!r) {
		if (mr)
			sv_mr_unpin_one(mr);
		sv_log("out of memory queueing a response: dropping the connection");
		sv_conn_lost(c);
		return;
	}
	h->magic = SV_WIRE_MAGIC;
	r->conn = c;
	r->hdr = *h;
	r->data = data;
	r->mr = mr;
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

void sv_queue_simple(struct sv_conn *c, struct sv_qp *qp, uint8_t op, uint8_t nak, uint32_t psn)
{
	struct sv_hdr h = { .op = op, .nak = nak, .psn = psn };

	if (qp) {
		h.src_qpn = qp->ibqp.qp_num;
		h.dst_qpn = qp->attr.dest_qp_num;
		h.rnr_timer = qp->attr.min_rnr_timer;
	}
	sv_queue_resp(c, &h, NULL, NULL, qp);
}

static bool op_has_payload(uint8_t op)
{
	return op == SV_OP_SEND || op == SV_OP_SEND_IMM || op == SV_OP_WRITE ||
	       op == SV_OP_WRITE_IMM || op == SV_OP_READ_RESP;
}

/* Read (lock dropped) a payload into iov; false if the connection failed. */
bool sv_read_payload(struct sv_conn *c, struct sv_qp *qp, struct iovec *iov, int n)
{
	int rc;

	qp->refs++;
	pthread_mutex_unlock(&sv_eng.lock);
	rc = sv_readv_full(c->fd, iov, n);
	pthread_mutex_lock(&sv_eng.lock);
	sv_qp_put(qp);
	if (rc) {
		sv_conn_lost(c);
		return false;
	}
	return true;
}

bool sv_drain_msg(struct sv_conn *c, const struct sv_hdr *h)
{
	int rc;

	if (!op_has_payload(h->op) || !h->len)
		return true;
	pthread_mutex_unlock(&sv_eng.lock);
	rc = sv_drain(c->fd, h->len);
	pthread_mutex_lock(&sv_eng.lock);
	if (rc) {
		sv_conn_lost(c);
		return false;
	}
	return true;
}

void sv_count_rx(struct sv_qp *qp, uint64_t len)
{
	if (qp->stats) {
		__atomic_fetch_add(&qp->stats->rx_bytes, len, __ATOMIC_RELAXED);
		__atomic_fetch_add(&qp->stats->rx_msgs, 1, __ATOMIC_RELAXED);
	}
}
