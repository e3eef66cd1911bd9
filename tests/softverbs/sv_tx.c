// SPDX-License-Identifier: MIT
/*
 * softverbs: the tx thread. It sends queued responses first (in order per
 * connection), then the posted WR that has waited longest across all QPs in
 * RTS, connecting a QP's path on first use; payloads are written straight
 * from registered memory. It also fails WRs whose retry budget ran out.
 *
 * Pacing (device and uplink rate limits, uplink delay; see sv_pace_reserve)
 * never sleeps here: the next message of each QP and of each connection's
 * responses reserves its slot on its links once, and the thread sends
 * whatever is ready, oldest first, and otherwise waits on tx_cond until the
 * earliest ready time (or new work). A slow link only delays its own
 * messages.
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
	sv_set_sock_opts(fd);
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
		.pkey = sv_pkey_at(p, qp->attr.pkey_index),
		.src_ipv4 = p->link_layer == IBV_LINK_LAYER_ETHERNET ? p->ipv4 : 0,
	};
	int fd;

	memcpy(hello.gid, qp->attr.ah_attr.grh.dgid.raw, 16);
	if (qp->link_cut) {
		sv_path_trouble(qp, "link cut (fault injection)");
		return;
	}
	if (!sv_subnet_reaches(p, sv_gid_ipv4(hello.gid))) {
		/* no route off the port's subnet (sv_subnet.c): nothing is sent */
		sv_path_trouble(qp, "destination outside the port's subnet");
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
		sv_path_trouble(qp, "cannot connect");
		return;
	}
	qp->out = sv_conn_new(fd, true);
	if (!qp->out) {
		close(fd);
		sv_path_trouble(qp, "out of memory");
		return;
	}
	qp->out->qp = qp;
	qp->out->refs++; /* qp->out's reference */
}

/*
 * Local side of a WR: iovecs for its payload; false on a bad lkey (wrong
 * PD, out of the MR, or a READ into memory without LOCAL_WRITE). An SGE of
 * length 0 names no memory and its lkey is not looked up, as rxe's
 * copy_data() skips it and mlx5 leaves it out of the WQE.
 */
static bool local_iov(struct sv_qp *qp, struct sv_swqe *w, struct iovec *iov, int *n,
		      struct sv_mr_pins *pins)
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
		struct sv_mr *mr;
		void *p;

		if (!w->sge[i].length)
			continue;
		mr = sv_mr_lookup(w->sge[i].lkey);
		if (!mr || mr->ibmr.pd != qp->ibqp.pd)
			return false;
		if (w->opcode == IBV_WR_RDMA_READ && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
			return false;
		p = sv_mr_translate(mr, w->sge[i].addr, w->sge[i].length, false);
		if (!p)
			return false;
		sv_mr_pin(pins, mr);
		iov[*n].iov_base = p;
		iov[*n].iov_len = w->sge[i].length;
		(*n)++;
	}
	return true;
}

static uint8_t wire_op(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND: return SV_OP_SEND;
	case IBV_WR_SEND_WITH_IMM: return SV_OP_SEND_IMM;
	case IBV_WR_RDMA_WRITE: return SV_OP_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM: return SV_OP_WRITE_IMM;
	default: return SV_OP_READ_REQ;
	}
}

static bool cut_applies(struct sv_qp *qp)
{
	return sv_eng.cfg.fault_cut_bytes &&
	       (!sv_eng.cfg.fault_cut_qp || sv_eng.cfg.fault_cut_qp == qp->ordinal) &&
	       (!sv_eng.cfg.fault_cut_dev[0] ||
		!strcmp(sv_eng.cfg.fault_cut_dev, qp->ctx->dev->ibdev.name));
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
	sv_stats_device_add(qp->ctx->dev->index, bytes);
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
	struct sv_mr_pins pins = { .n = 0 };
	struct sv_conn *c;
	bool cut = false;
	int n, rc;

	if (!qp->out) {
		tx_connect(qp);
		return; /* re-evaluated on the next pass */
	}
	if (!local_iov(qp, w, iov + 1, &n, &pins)) {
		sv_mr_unpin(&pins);
		/* Errors complete in order: wait for earlier WRs first. The
		 * QP is not picked again until they have completed (or are
		 * resent): tx_pick() skips a stalled QP. */
		if (qp->sq_head == qp->sq_send) {
			qp->sq_stalled = false;
			sv_qp_complete_send(qp, IBV_WC_LOC_PROT_ERR);
		} else {
			qp->sq_stalled = true;
		}
		return;
	}
	qp->sq_stalled = false;
	if (h.op == SV_OP_READ_REQ)
		n = 0;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	n++;
	if (cut_applies(qp)) {
		budget = sv_eng.cfg.fault_cut_bytes > qp->bytes_sent
				 ? sv_eng.cfg.fault_cut_bytes - qp->bytes_sent
				 : 0;
		if (payload >= budget) {
			cut = true;
			if (sv_eng.cfg.fault_cut_deliver)
				budget = payload; /* it lands; the link goes before its ACK */
			else
				n = iov_trim(iov, n, sizeof(h) + budget);
		}
	}
	qp->tx_busy = true;
	qp->tx_busy_idx = qp->sq_send;
	qp->sq_send++;
	qp->pace_set = false; /* its slot is used */
	c = qp->out;
	c->refs++;
	pthread_mutex_unlock(&sv_eng.lock);

	rc = sv_writev_full(c->fd, iov, n);

	pthread_mutex_lock(&sv_eng.lock);
	sv_mr_unpin(&pins);
	if (qp->tx_busy) {
		/* sendmsg() no longer reads the buffer: a response that came
		 * meanwhile may complete the WR now, and a move to ERR may
		 * flush it and whatever waited behind it. */
		qp->tx_busy = false;
		if (qp->held) {
			qp->held = false;
			if (!qp->destroyed)
				sv_qp_complete_send(qp, qp->held_status);
		}
		if (qp->attr.qp_state == IBV_QPS_ERR && !qp->destroyed)
			sv_qp_to_error(qp);
	}
	qp->bytes_sent += payload < budget ? payload : budget;
	account_tx(qp, payload < budget ? payload : budget);
	if (cut) {
		sv_debug("fault: cutting QP 0x%06x after %llu bytes", qp->ibqp.qp_num,
			 (unsigned long long)qp->bytes_sent);
		qp->link_cut = true;
		sv_conn_lost(c);
	} else if (rc) {
		sv_conn_lost(c);
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
	/* Counted before the write: the requester may complete its READ, and a
	 * test read the stats, before this thread runs again after writev(). */
	if (bytes && r->qp) {
		pthread_mutex_lock(&sv_eng.lock);
		account_tx(r->qp, bytes);
		pthread_mutex_unlock(&sv_eng.lock);
	}
	if (sv_writev_full(r->conn->fd, iov, n)) {
		pthread_mutex_lock(&sv_eng.lock);
		sv_conn_lost(r->conn);
		pthread_mutex_unlock(&sv_eng.lock);
	}
}

static bool port_up(struct sv_qp *qp)
{
	return qp->attr.port_num &&
	       qp->ctx->dev->port[qp->attr.port_num - 1].state == IBV_PORT_ACTIVE;
}

/*
 * May the WR at qp->sq_send go on the wire now? Its slot on its links is
 * reserved the first time it is asked (a READ request carries no payload: it
 * only waits for its links to be free); otherwise *wake is lowered to the
 * time it may go.
 */
static bool wqe_paced(struct sv_qp *qp, uint64_t now, uint64_t *wake)
{
	if (!qp->pace_set || qp->pace_idx != qp->sq_send) {
		const struct sv_swqe *w = &qp->sq[qp->sq_send % qp->sq_size];
		uint64_t bytes = w->opcode == IBV_WR_RDMA_READ ? 0 : w->len;

		qp->pace_ready_ns = sv_pace_reserve(qp->ctx->dev->index, qp->uplink, bytes, now);
		qp->pace_idx = qp->sq_send;
		qp->pace_set = true;
	}
	if (qp->pace_ready_ns <= now)
		return true;
	if (qp->pace_ready_ns < *wake)
		*wake = qp->pace_ready_ns;
	return false;
}

/* Timeouts due now, and the QP whose next WR has waited longest among those
 * that may send now. */
static struct sv_qp *tx_pick(uint64_t now, uint64_t *wake)
{
	struct sv_qp *best = NULL;
	uint64_t best_t = UINT64_MAX;

	for (struct sv_qp *qp = sv_eng.qps; qp; qp = qp->next) {
		if (qp->destroyed || qp->attr.qp_state != IBV_QPS_RTS)
			continue;
		if (!port_up(qp) && qp->sq_head < qp->sq_tail && !qp->retry_since_ns)
			sv_path_trouble(qp, "port down");
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
		if (qp->sq_stalled && qp->sq_head < qp->sq_send)
			continue; /* woken by the completions it waits for */
		if (now < qp->rnr_until_ns || now < qp->retry_at_ns) {
			uint64_t t = qp->rnr_until_ns > qp->retry_at_ns ? qp->rnr_until_ns
									: qp->retry_at_ns;

			if (t < *wake)
				*wake = t;
			continue;
		}
		if (!wqe_paced(qp, now, wake))
			continue;
		if (qp->sq[qp->sq_send % qp->sq_size].post_ns < best_t) {
			best_t = qp->sq[qp->sq_send % qp->sq_size].post_ns;
			best = qp;
		}
	}
	return best;
}

/*
 * May response r go on the wire now? A READ response's payload reserves its
 * slot on the responding QP's device and uplink, once. Nothing waits for a
 * connection that is gone or a QP being destroyed (destroy_qp waits for its
 * queued responses to go out).
 */
static bool resp_paced(struct sv_resp *r, uint64_t now, uint64_t *wake)
{
	if (r->conn->dead || (r->qp && r->qp->destroyed))
		return true;
	if (!r->paced) {
		r->paced = true;
		r->ready_ns = now;
		if (r->data && r->hdr.len && r->qp)
			r->ready_ns = sv_pace_reserve(r->qp->ctx->dev->index, r->qp->uplink,
						      r->hdr.len, now);
	}
	if (r->ready_ns <= now)
		return true;
	if (r->ready_ns < *wake)
		*wake = r->ready_ns;
	return false;
}

/*
 * Take the oldest queued response that may go now and is first in line on
 * its connection (a requester matches responses to its WRs in order). The
 * usual case, the queue's head being ready, takes no scan.
 */
static struct sv_resp *resp_pick(uint64_t now, uint64_t *wake)
{
	struct sv_resp *r, *prev = NULL;
	bool scanning = false;

	for (r = sv_eng.resp_head; r; prev = r, r = r->next) {
		if (scanning && r->conn->resp_seen)
			continue; /* an earlier response on its connection waits */
		if (resp_paced(r, now, wake)) {
			if (prev)
				prev->next = r->next;
			else
				sv_eng.resp_head = r->next;
			if (sv_eng.resp_tail == r)
				sv_eng.resp_tail = prev;
			return r;
		}
		if (!scanning) {
			for (struct sv_resp *o = sv_eng.resp_head; o; o = o->next)
				o->conn->resp_seen = false;
			scanning = true;
		}
		r->conn->resp_seen = true;
	}
	return NULL;
}

void *sv_tx_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sv_eng.lock);
	while (!sv_eng.stop) {
		uint64_t now = sv_now_ns(), wake = now + 100000000ull;
		struct sv_resp *r = resp_pick(now, &wake);
		struct sv_qp *qp;

		if (r) {
			pthread_mutex_unlock(&sv_eng.lock);
			tx_resp(r);
			pthread_mutex_lock(&sv_eng.lock);
			r->conn->pending--;
			if (r->mr)
				sv_mr_unpin_one(r->mr);
			sv_conn_put(r->conn);
			if (r->qp)
				sv_qp_put(r->qp);
			free(r);
			continue;
		}
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
