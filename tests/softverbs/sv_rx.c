// SPDX-License-Identifier: MIT
/*
 * softverbs: the rx thread. It poll()s the listening socket and every
 * connection, reads one message at a time and applies it: requests go to
 * sv_responder.c, responses (ACK, NAK, READ response) complete the
 * requester's oldest WR here. It never writes to a socket, so it always
 * drains (deadlock freedom: see sv_engine.c). It also runs the port
 * up/down fault timers.
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

#define SV_MAX_POLL 4096

/* Requester side: a response for the oldest outstanding WR of qp. */
static void on_response(struct sv_conn *c, const struct sv_hdr *h)
{
	struct sv_qp *qp = c->qp;
	struct sv_swqe *w;
	uint64_t head;

	if (!qp || qp->destroyed || qp->out != c || qp->attr.qp_state != IBV_QPS_RTS ||
	    qp->sq_head == qp->sq_send) {
		sv_drain_msg(c, h);
		return;
	}
	head = qp->sq_head;
	w = &qp->sq[head % qp->sq_size];
	if (w->psn != h->psn) {
		sv_debug("QP 0x%06x: response for PSN %u, expected %u", qp->ibqp.qp_num, h->psn,
			 w->psn);
		sv_drain_msg(c, h);
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
		struct sv_mr_pins pins = { .n = 0 };
		bool ok;
		int n = 0;

		for (uint32_t i = 0; i < w->num_sge && left; i++) {
			uint64_t take = w->sge[i].length < left ? w->sge[i].length : left;
			struct sv_mr *mr;
			void *p;

			if (!take)
				continue; /* names no memory: no lkey */
			mr = sv_mr_lookup(w->sge[i].lkey);
			p = mr ? sv_mr_translate(mr, w->sge[i].addr, take, false) : NULL;
			if (!p) {
				/* Deregistered under us: drop the data. */
				sv_mr_unpin(&pins);
				sv_drain_msg(c, h);
				sv_qp_complete_send(qp, IBV_WC_LOC_PROT_ERR);
				return;
			}
			sv_mr_pin(&pins, mr);
			iov[n].iov_base = p;
			iov[n++].iov_len = take;
			left -= take;
		}
		if (h->len > w->len) {
			sv_mr_unpin(&pins);
			sv_drain_msg(c, h);
			sv_qp_complete_send(qp, IBV_WC_LOC_LEN_ERR);
			return;
		}
		ok = sv_read_payload(c, qp, iov, n);
		sv_mr_unpin(&pins);
		if (!ok)
			return;
		sv_count_rx(qp, h->len);
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
			qp->sq_send = qp->sq_head; /* go back N */
			qp->rnr_until_ns = sv_now_ns() + sv_rnr_delay_ns(h->rnr_timer);
			break;
		case SV_NAK_ACCESS: sv_qp_complete_send(qp, IBV_WC_REM_ACCESS_ERR); break;
		case SV_NAK_INV_REQ: sv_qp_complete_send(qp, IBV_WC_REM_INV_REQ_ERR); break;
		case SV_NAK_OP_ERR: sv_qp_complete_send(qp, IBV_WC_REM_OP_ERR); break;
		case SV_NAK_SEQ: sv_path_trouble(qp, "PSN sequence error"); break;
		default: sv_path_trouble(qp, "responder not ready or in error"); break;
		}
		break;
	default:
		sv_log("unknown response op %u", h->op);
		sv_conn_lost(c);
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
		sv_conn_lost(c);
		return;
	}
	if (c->dead) {
		sv_drain_msg(c, &h);
		return;
	}
	if (c->outbound)
		on_response(c, &h);
	else if (h.op == SV_OP_HELLO)
		sv_on_hello(c, &h);
	else
		sv_on_request(c, &h);
}

/*
 * The fault knobs' times for device d: its ports go down, then come back. With
 * SOFTVERBS_FAULT_PORT_FLAPS=N and both times set, cycle i (from 0) goes down at
 * DOWN + i * UP and comes back at (i + 1) * UP, N times; DOWN alone is once, for good.
 */
static void port_fault(int d, long el, int *timeout_ms)
{
	long dn = sv_eng.cfg.fault_port_down_ms[d], up = sv_eng.cfg.fault_port_up_ms[d], t;
	int *downs = &sv_eng.port_downs[d], *ups = &sv_eng.port_ups[d];
	int n = up >= 0 ? sv_eng.cfg.fault_port_flaps : 1;

	if (dn >= 0 && *downs < n && *downs == *ups) {
		t = dn + (up >= 0 ? *downs * up : 0);
		if (el >= t) {
			++*downs;
			sv_debug("fault: device %d's ports down (%d of %d)", d, *downs, n);
			sv_set_port_state(d, IBV_PORT_DOWN);
			pthread_cond_broadcast(&sv_eng.tx_cond);
		} else if (t - el < *timeout_ms) {
			*timeout_ms = (int)(t - el);
		}
	}
	if (up >= 0 && *downs > *ups) {
		t = (*ups + 1) * up;
		if (el >= t) {
			++*ups;
			sv_debug("fault: device %d's ports up (%d of %d)", d, *ups, n);
			sv_set_port_state(d, IBV_PORT_ACTIVE);
			pthread_cond_broadcast(&sv_eng.tx_cond);
		} else if (t - el < *timeout_ms) {
			*timeout_ms = (int)(t - el);
		}
	}
}

static void port_faults(uint64_t now, int *timeout_ms)
{
	long el = (long)((now - sv_eng.start_ns) / 1000000ull);
	int n;

	sv_devices(&n);
	for (int d = 0; d < n && d < SV_MAX_DEVICES; d++)
		port_fault(d, el, timeout_ms);
}

void *sv_rx_main(void *arg)
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
				sv_set_sock_opts(fd);
				pthread_mutex_lock(&sv_eng.lock);
				if (!sv_conn_new(fd, false))
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
