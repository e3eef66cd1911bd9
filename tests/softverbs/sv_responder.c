// SPDX-License-Identifier: MIT
/*
 * softverbs: the responder side, run by the rx thread: binding a connection
 * to its QP (hello), PSN checks, applying SEND / WRITE / WRITE_WITH_IMM /
 * READ requests to registered memory, RNR and access errors.
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

static bool hello_matches(struct sv_qp *qp, const struct sv_hdr *h)
{
	const struct sv_port *p = &qp->ctx->dev->port[qp->attr.port_num - 1];

	if (qp->attr.qp_state != IBV_QPS_RTR && qp->attr.qp_state != IBV_QPS_RTS)
		return false;
	if (qp->attr.dest_qp_num != h->src_qpn || h->link_layer != p->link_layer)
		return false;
	if (!sv_pkey_match(h->pkey, sv_pkey_at(p, qp->attr.pkey_index))) {
		sv_debug("QP 0x%06x: requester QP 0x%06x has P_Key 0x%04x, not in our partition "
			 "(0x%04x): dropped",
			 qp->ibqp.qp_num, h->src_qpn, h->pkey, sv_pkey_at(p, qp->attr.pkey_index));
		return false;
	}
	if (!sv_subnet_reaches(p, h->src_ipv4)) {
		sv_debug("QP 0x%06x: requester QP 0x%06x is outside the port's subnet: dropped",
			 qp->ibqp.qp_num, h->src_qpn);
		return false;
	}
	if (!h->is_global)
		return h->lid == p->lid;
	for (int i = 0; i < p->ngids; i++)
		if (!memcmp(p->gid[i].raw, h->gid, 16))
			return true;
	return false;
}

bool sv_qp_ready(const struct sv_qp *qp)
{
	return qp->attr.qp_state == IBV_QPS_RTR || qp->attr.qp_state == IBV_QPS_RTS;
}

/* Bind an inbound connection to its QP. A QP that exists but is not yet
 * ready (RESET/INIT) is bound unverified: its requests are dropped (NAKed as
 * not ready) until it reaches RTR, as a real responder drops packets. */
void sv_on_hello(struct sv_conn *c, const struct sv_hdr *h)
{
	struct sv_qp *qp = sv_qp_find(h->dst_qpn);

	if (!qp || (sv_qp_ready(qp) && !hello_matches(qp, h))) {
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
	c->verified = sv_qp_ready(qp);
}

/*
 * Drain a request's payload, which drops the engine lock: the QP may be destroyed
 * meanwhile. The reference keeps it in memory (ibv_destroy_qp waits for it, and cannot
 * go on before we drop the lock again). True when the payload is gone and the QP is still
 * live and this connection's, so that it may be answered.
 */
static bool drain_for(struct sv_conn *c, struct sv_qp *qp, const struct sv_hdr *h)
{
	bool ok;

	qp->refs++;
	ok = sv_drain_msg(c, h);
	sv_qp_put(qp);
	return ok && !qp->destroyed && c->qp == qp;
}

/* Responder error that moves the responder QP to ERR too. */
static void responder_error(struct sv_conn *c, struct sv_qp *qp, const struct sv_hdr *h,
			    uint8_t nak, enum ibv_event_type ev)
{
	if (!drain_for(c, qp, h))
		return;
	sv_queue_simple(c, qp, SV_OP_NAK, nak, h->psn);
	sv_async_event(qp->ctx, ev, &qp->ibqp, 0);
	sv_qp_to_error(qp);
}

static void responder_rnr(struct sv_conn *c, struct sv_qp *qp, const struct sv_hdr *h)
{
	if (!drain_for(c, qp, h))
		return;
	c->rnr_wait = true;
	sv_queue_simple(c, qp, SV_OP_NAK, SV_NAK_RNR, h->psn);
}

/*
 * Does the responder QP take this operation at all? RDMA WRITE and READ must
 * be enabled in its qp_access_flags, and a READ needs a responder resource
 * (max_dest_rd_atomic > 0). Otherwise the request is invalid, whatever its
 * length or rkey: rxe's check_op_valid() and check_resource(), and rdmavt's
 * RC receive, answer NAK Invalid Request (class C), not an R_Key violation.
 */
static bool op_enabled(const struct sv_qp *qp, uint8_t op)
{
	unsigned int acc = qp->attr.qp_access_flags;

	switch (op) {
	case SV_OP_WRITE:
	case SV_OP_WRITE_IMM: return acc & IBV_ACCESS_REMOTE_WRITE;
	case SV_OP_READ_REQ: return (acc & IBV_ACCESS_REMOTE_READ) && qp->attr.max_dest_rd_atomic;
	default: return true;
	}
}

/*
 * Check the rkey of an RDMA WRITE or READ the QP takes. False: an R_Key
 * violation (remote access error). *p is the host address to access, or
 * NULL for a zero-length access: IBA C9-88 asks no valid R_Key and no
 * address of those (rxe's check_rkey() and rdmavt skip the lookup too), and
 * NCCL sends exactly that, a memset-to-zero WRITE_WITH_IMM with rkey 0.
 */
static bool remote_target(struct sv_qp *qp, const struct sv_hdr *h, unsigned int need, void **p,
			  struct sv_mr_pins *pins)
{
	struct sv_mr *mr;

	*p = NULL;
	if (sv_eng.cfg.fault_remote_access &&
	    ++sv_eng.nremote_ops == sv_eng.cfg.fault_remote_access) {
		sv_debug("fault: forcing a remote access error");
		return false;
	}
	if (!h->len)
		return true;
	mr = sv_mr_lookup(h->rkey);
	if (!mr || mr->ibmr.pd != qp->ibqp.pd || !(mr->access & need))
		return false;
	*p = sv_mr_translate(mr, h->raddr, h->len, true);
	if (!*p)
		return false;
	sv_mr_pin(pins, mr);
	return true;
}

/* Scatter list of a receive WR; -1: bad lkey, -2: too small. Only the SGEs
 * the message reaches are checked, and none of length 0 (rxe copy_data()). */
static int recv_iov(struct sv_qp *qp, const struct sv_rwqe *r, uint64_t len, struct iovec *iov,
		    int *n, struct sv_mr_pins *pins)
{
	uint64_t left = len;

	*n = 0;
	for (uint32_t i = 0; i < r->num_sge && left; i++) {
		const struct ibv_sge *s = &r->sge[i];
		uint64_t take = s->length < left ? s->length : left;
		struct sv_mr *mr;
		void *p;

		if (!take)
			continue;
		mr = sv_mr_lookup(s->lkey);
		if (!mr || mr->ibmr.pd != qp->ibqp.pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE))
			return -1;
		p = sv_mr_translate(mr, s->addr, take, false);
		if (!p)
			return -1;
		sv_mr_pin(pins, mr);
		iov[*n].iov_base = p;
		iov[*n].iov_len = take;
		(*n)++;
		left -= take;
	}
	return left ? -2 : 0;
}

void sv_on_request(struct sv_conn *c, const struct sv_hdr *h)
{
	struct sv_qp *qp = c->qp;
	struct iovec iov[SV_MAX_SGE];
	struct sv_mr_pins pins = { .n = 0 };
	struct sv_rwqe r;
	bool ok;
	void *p;
	int n;

	if (!qp || qp->destroyed) {
		/* Unbound or being destroyed: ignore, the requester times out
		 * once the connection closes. */
		sv_drain_msg(c, h);
		return;
	}
	if (!sv_qp_ready(qp)) {
		/* Not yet RTR, or in ERR: a real responder drops the packet. */
		if (drain_for(c, qp, h))
			sv_queue_simple(c, qp, SV_OP_NAK, SV_NAK_DEAD, h->psn);
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
				if (drain_for(c, qp, h))
					sv_queue_simple(c, qp, SV_OP_ACK, 0, h->psn);
				return;
			}
		} else {
			/* Ahead: a gap after an RNR NAK (go-back-N, dropped
			 * quietly) or PSNs that do not match (NAKed). */
			if (drain_for(c, qp, h) && !c->rnr_wait) {
				sv_debug("QP 0x%06x: PSN %u, expected %u", qp->ibqp.qp_num, h->psn,
					 qp->resp_psn);
				sv_queue_simple(c, qp, SV_OP_NAK, SV_NAK_SEQ, h->psn);
			}
			return;
		}
	} else {
		c->rnr_wait = false;
	}
	if (!op_enabled(qp, h->op)) {
		sv_debug("QP 0x%06x: request op %u not enabled on this QP", qp->ibqp.qp_num, h->op);
		responder_error(c, qp, h, SV_NAK_INV_REQ, IBV_EVENT_QP_REQ_ERR);
		return;
	}

	switch (h->op) {
	case SV_OP_WRITE:
	case SV_OP_WRITE_IMM:
		if (!remote_target(qp, h, IBV_ACCESS_REMOTE_WRITE, &p, &pins)) {
			responder_error(c, qp, h, SV_NAK_ACCESS, IBV_EVENT_QP_ACCESS_ERR);
			return;
		}
		if (h->op == SV_OP_WRITE_IMM && qp->rq_head == qp->rq_tail) {
			sv_mr_unpin(&pins);
			responder_rnr(c, qp, h);
			return;
		}
		iov[0].iov_base = p;
		iov[0].iov_len = h->len;
		ok = sv_read_payload(c, qp, iov, 1);
		sv_mr_unpin(&pins);
		if (!ok)
			return;
		sv_count_rx(qp, h->len);
		qp->resp_psn = (qp->resp_psn + 1) & 0xffffff;
		if (h->op == SV_OP_WRITE_IMM && qp->attr.qp_state != IBV_QPS_ERR &&
		    sv_qp_pop_recv(qp, &r))
			sv_qp_complete_recv(qp, &r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
					    (uint32_t)h->len, h);
		sv_queue_simple(c, qp, SV_OP_ACK, 0, h->psn);
		return;
	case SV_OP_SEND:
	case SV_OP_SEND_IMM:
		if (!sv_qp_pop_recv(qp, &r)) {
			responder_rnr(c, qp, h);
			return;
		}
		switch (recv_iov(qp, &r, h->len, iov, &n, &pins)) {
		case -1:
			sv_mr_unpin(&pins);
			sv_qp_complete_recv(qp, &r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, NULL);
			responder_error(c, qp, h, SV_NAK_OP_ERR, IBV_EVENT_QP_FATAL);
			return;
		case -2:
			sv_mr_unpin(&pins);
			sv_qp_complete_recv(qp, &r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, NULL);
			responder_error(c, qp, h, SV_NAK_INV_REQ, IBV_EVENT_QP_FATAL);
			return;
		}
		ok = sv_read_payload(c, qp, iov, n);
		sv_mr_unpin(&pins);
		if (!ok)
			return;
		sv_count_rx(qp, h->len);
		qp->resp_psn = (qp->resp_psn + 1) & 0xffffff;
		if (qp->attr.qp_state != IBV_QPS_ERR)
			sv_qp_complete_recv(qp, &r, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)h->len,
					    h);
		sv_queue_simple(c, qp, SV_OP_ACK, 0, h->psn);
		return;
	case SV_OP_READ_REQ: {
		struct sv_hdr resp = {
			.op = SV_OP_READ_RESP,
			.psn = h->psn,
			.len = h->len,
			.src_qpn = qp->ibqp.qp_num,
			.dst_qpn = qp->attr.dest_qp_num,
		};

		if (!remote_target(qp, h, IBV_ACCESS_REMOTE_READ, &p, &pins)) {
			responder_error(c, qp, h, SV_NAK_ACCESS, IBV_EVENT_QP_ACCESS_ERR);
			return;
		}
		if (h->psn == qp->resp_psn)
			qp->resp_psn = (qp->resp_psn + 1) & 0xffffff;
		/* the response keeps the pin until it is on the wire */
		sv_queue_resp(c, &resp, p, pins.n ? pins.mr[0] : NULL, qp);
		return;
	}
	default: sv_log("unknown request op %u from QP 0x%06x", h->op, h->src_qpn); sv_conn_lost(c);
	}
}
