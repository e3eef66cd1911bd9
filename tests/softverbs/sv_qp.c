// SPDX-License-Identifier: MIT
/*
 * softverbs: RC queue pairs: creation, the verbs state machine with the
 * attribute-mask rules of a real driver (the kernel's qp_state_table for RC),
 * posting work requests, and turning their outcome into completions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/softverbs/sv_internal.h"

static struct sv_qp *to_qp(struct ibv_qp *q)
{
	return sv_container_of(q, struct sv_qp, ibqp);
}

/* Called with sv_eng.lock held. */
struct sv_qp *sv_qp_find(uint32_t qpn)
{
	for (struct sv_qp *qp = sv_eng.qps; qp; qp = qp->next)
		if (qp->ibqp.qp_num == qpn && !qp->destroyed)
			return qp;
	return NULL;
}

void sv_qp_put(struct sv_qp *qp)
{
	if (--qp->refs == 0)
		pthread_cond_broadcast(&sv_eng.idle_cond);
}

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct sv_context *ctx = sv_container_of(pd->context, struct sv_context, vctx.context);
	struct ibv_qp_cap *cap = &init->cap;
	struct sv_qp *qp;
	uint32_t qpn;
	int err;

	if (init->qp_type != IBV_QPT_RC || init->srq) {
		errno = EOPNOTSUPP; /* RC only; no SRQ */
		return NULL;
	}
	if (!init->send_cq || !init->recv_cq || cap->max_send_wr > SV_MAX_QP_WR ||
	    cap->max_recv_wr > SV_MAX_QP_WR || cap->max_send_sge > SV_MAX_SGE ||
	    cap->max_recv_sge > SV_MAX_SGE || cap->max_inline_data > SV_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->cap = *cap;
	if (qp->cap.max_send_sge < 1)
		qp->cap.max_send_sge = 1;
	if (qp->cap.max_recv_sge < 1)
		qp->cap.max_recv_sge = 1;
	qp->sq_size = cap->max_send_wr ? cap->max_send_wr : 1;
	qp->rq_size = cap->max_recv_wr ? cap->max_recv_wr : 1;
	qp->sq = calloc(qp->sq_size, sizeof(*qp->sq));
	qp->sq_sge = calloc((size_t)qp->sq_size * qp->cap.max_send_sge, sizeof(*qp->sq_sge));
	qp->sq_inline = qp->cap.max_inline_data
				? malloc((size_t)qp->sq_size * qp->cap.max_inline_data)
				: NULL;
	qp->rq = calloc(qp->rq_size, sizeof(*qp->rq));
	qp->rq_sge = calloc((size_t)qp->rq_size * qp->cap.max_recv_sge, sizeof(*qp->rq_sge));
	if (!qp->sq || !qp->sq_sge || !qp->rq || !qp->rq_sge ||
	    (qp->cap.max_inline_data && !qp->sq_inline)) {
		err = ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < qp->sq_size; i++) {
		qp->sq[i].sge = &qp->sq_sge[(size_t)i * qp->cap.max_send_sge];
		if (qp->sq_inline)
			qp->sq[i].inline_buf = &qp->sq_inline[(size_t)i * qp->cap.max_inline_data];
	}
	for (uint32_t i = 0; i < qp->rq_size; i++)
		qp->rq[i].sge = &qp->rq_sge[(size_t)i * qp->cap.max_recv_sge];

	err = sv_qpn_alloc(sv_eng.ep_path, &qpn, qp->qpfile, sizeof(qp->qpfile));
	if (err)
		goto fail;
	qp->ctx = ctx;
	qp->scq = sv_container_of(init->send_cq, struct sv_cq, ibcq);
	qp->rcq = sv_container_of(init->recv_cq, struct sv_cq, ibcq);
	qp->sq_sig_all = init->sq_sig_all != 0;
	qp->ibqp.context = pd->context;
	qp->ibqp.qp_context = init->qp_context;
	qp->ibqp.pd = pd;
	qp->ibqp.send_cq = init->send_cq;
	qp->ibqp.recv_cq = init->recv_cq;
	qp->ibqp.handle = qpn;
	qp->ibqp.qp_num = qpn;
	qp->ibqp.state = IBV_QPS_RESET;
	qp->ibqp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&qp->ibqp.mutex, NULL);
	pthread_cond_init(&qp->ibqp.cond, NULL);
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_4096;
	*cap = qp->cap;

	pthread_mutex_lock(&sv_eng.lock);
	qp->ordinal = ++sv_eng.nqp_created;
	qp->stats = sv_stats_qp_slot(qpn);
	qp->scq->nqps++;
	qp->rcq->nqps++;
	qp->next = sv_eng.qps;
	sv_eng.qps = qp;
	pthread_mutex_unlock(&sv_eng.lock);
	sv_debug("created QP 0x%06x (#%d)", qpn, qp->ordinal);
	return &qp->ibqp;
fail:
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp->rq);
	free(qp->rq_sge);
	free(qp);
	errno = err;
	return NULL;
}

/* Flush every outstanding WR with IBV_WC_WR_FLUSH_ERR and stop sending.
 * Called with sv_eng.lock held. */
void sv_qp_to_error(struct sv_qp *qp)
{
	bool was_err = qp->attr.qp_state == IBV_QPS_ERR;

	qp->attr.qp_state = IBV_QPS_ERR;
	qp->ibqp.state = IBV_QPS_ERR;
	/* Stops at a WR the tx thread is still writing: it and the rest are
	 * flushed when that write returns (tx_wqe). */
	while (qp->sq_head < qp->sq_tail && sv_qp_complete_send(qp, IBV_WC_WR_FLUSH_ERR))
		;
	while (qp->rq_head < qp->rq_tail) {
		struct sv_rwqe r;

		sv_qp_pop_recv(qp, &r);
		sv_qp_complete_recv(qp, &r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, NULL);
	}
	if (qp->out) {
		sv_conn_kill(qp->out);
		sv_conn_put(qp->out);
		qp->out = NULL;
	}
	if (!was_err)
		sv_debug("QP 0x%06x -> ERR", qp->ibqp.qp_num);
	pthread_cond_broadcast(&sv_eng.tx_cond);
}

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	default: return IBV_WC_SEND;
	}
}

/* Retire the oldest send WR with status; an error moves the QP to ERR (which
 * flushes the rest). False if the WR's request is still being written: its
 * status is held until tx_wqe() has it back (the first status wins).
 * Called with sv_eng.lock held. */
bool sv_qp_complete_send(struct sv_qp *qp, enum ibv_wc_status status)
{
	struct sv_swqe *w = &qp->sq[qp->sq_head % qp->sq_size];

	if (qp->tx_busy && qp->tx_busy_idx == qp->sq_head) {
		if (!qp->held) {
			qp->held = true;
			qp->held_status = status;
		}
		return false;
	}
	if (status != IBV_WC_SUCCESS || qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED)) {
		struct ibv_wc wc = {
			.wr_id = w->wr_id,
			.status = status,
			.opcode = wc_opcode(w->opcode),
			.byte_len = (uint32_t)w->len,
			.qp_num = qp->ibqp.qp_num,
			.src_qp = qp->attr.dest_qp_num,
		};

		sv_cq_push(qp->scq, &wc, false, qp, qp->sq_head + 1);
	}
	qp->sq_head++;
	if (qp->sq_send < qp->sq_head)
		qp->sq_send = qp->sq_head;
	qp->rnr_left = qp->attr.rnr_retry;
	if (status == IBV_WC_SUCCESS)
		qp->retry_since_ns = 0; /* the path works */
	if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR)
		sv_qp_to_error(qp);
	return true;
}

bool sv_qp_pop_recv(struct sv_qp *qp, struct sv_rwqe *out)
{
	if (qp->rq_head == qp->rq_tail)
		return false;
	*out = qp->rq[qp->rq_head % qp->rq_size];
	qp->rq_head++;
	return true;
}

void sv_qp_complete_recv(struct sv_qp *qp, const struct sv_rwqe *r, enum ibv_wc_status status,
			 enum ibv_wc_opcode op, uint32_t byte_len, const struct sv_hdr *h)
{
	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = status,
		.opcode = op,
		.byte_len = byte_len,
		.qp_num = qp->ibqp.qp_num,
		.src_qp = qp->attr.dest_qp_num,
		.slid = qp->attr.ah_attr.dlid,
		.sl = qp->attr.ah_attr.sl,
	};

	if (h && (h->op == SV_OP_SEND_IMM || h->op == SV_OP_WRITE_IMM)) {
		wc.imm_data = h->imm;
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	if (qp->attr.ah_attr.is_global)
		wc.wc_flags |= IBV_WC_GRH;
	sv_cq_push(qp->rcq, &wc, h && (h->flags & SV_HDR_SOLICITED), NULL, 0);
}

/* The kernel's RC transition table (ib_modify_qp_is_ok), for the states
 * softverbs has (no SQD/SQE). */
struct sv_trans {
	bool valid;
	int req, opt;
};

static struct sv_trans sv_transition(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	struct sv_trans t = { .valid = false };

	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		t.valid = cur <= IBV_QPS_RTS || cur == IBV_QPS_ERR;
		return t;
	}
	switch (cur) {
	case IBV_QPS_RESET:
		if (next == IBV_QPS_INIT) {
			t.valid = true;
			t.req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		}
		break;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT) {
			t.valid = true;
			t.opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		} else if (next == IBV_QPS_RTR) {
			t.valid = true;
			t.req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			t.opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		}
		break;
	case IBV_QPS_RTR:
		if (next == IBV_QPS_RTS) {
			t.valid = true;
			t.req = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
			t.opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
		}
		break;
	case IBV_QPS_RTS:
		if (next == IBV_QPS_RTS) {
			t.valid = true;
			t.opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
				IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;
		}
		break;
	default: break;
	}
	return t;
}

static int check_av(struct sv_qp *qp, const struct ibv_ah_attr *ah, int port_num)
{
	struct sv_device *d = qp->ctx->dev;
	const struct sv_port *p = &d->port[port_num - 1];

	/* RoCE has no LIDs: a GRH with a valid source GID is mandatory. */
	if (d->roce && !ah->is_global)
		return EINVAL;
	if (ah->is_global && ah->grh.sgid_index >= p->ngids)
		return EINVAL;
	if (!d->roce && !ah->is_global && ah->dlid == 0)
		return EINVAL;
	return 0;
}

static uint32_t gid_ipv4(const union ibv_gid *g)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint32_t a;

	if (memcmp(g->raw, v4mapped, 12))
		return 0;
	memcpy(&a, &g->raw[12], 4);
	return a;
}

/* Source/destination IPv4 of a RoCEv2 QP (0 when the path is not RoCEv2). */
void sv_qp_addr(struct sv_qp *qp, uint32_t *sip, uint32_t *dip)
{
	const struct sv_port *p = &qp->ctx->dev->port[qp->attr.port_num - 1];
	const struct ibv_global_route *grh = &qp->attr.ah_attr.grh;

	*sip = *dip = 0;
	if (!qp->ctx->dev->roce || grh->sgid_index >= p->ngids ||
	    p->gid_type[grh->sgid_index] != IBV_GID_TYPE_ROCE_V2)
		return;
	*sip = gid_ipv4(&p->gid[grh->sgid_index]);
	*dip = gid_ipv4(&grh->dgid);
	if (!*sip || !*dip)
		*sip = *dip = 0;
}

/* Fabric model: UDP source port and uplink, fixed once the path is known. */
static void qp_set_flow(struct sv_qp *qp)
{
	uint32_t sip, dip;
	uint32_t lqpn = qp->ibqp.qp_num, rqpn = qp->attr.dest_qp_num;

	sv_qp_addr(qp, &sip, &dip);
	if (sip) {
		qp->sport = sv_rocev2_sport(lqpn, rqpn, qp->attr.ah_attr.grh.flow_label);
		qp->uplink = sv_uplink_of(sip, dip, qp->sport, sv_eng.cfg.uplinks);
	} else {
		/* IB or RoCEv1: no UDP header; spread by the QP pair instead. */
		qp->sport = 0;
		qp->uplink = (int)(sv_hash64(((uint64_t)lqpn << 32) | rqpn) %
				   (uint64_t)sv_eng.cfg.uplinks);
	}
	if (qp->stats) {
		qp->stats->dest_qpn = rqpn;
		qp->stats->sport = qp->sport;
		qp->stats->uplink = qp->uplink;
		qp->stats->sip = sip;
		qp->stats->dip = dip;
		qp->stats->tc = qp->attr.ah_attr.is_global ? qp->attr.ah_attr.grh.traffic_class : 0;
	}
}

static void qp_reset(struct sv_qp *qp)
{
	/* Completions of the old queue must not free slots of the new one. */
	sv_cq_forget_qp(qp->scq, qp);
	pthread_mutex_lock(&qp->scq->lock);
	qp->sq_polled = 0;
	pthread_mutex_unlock(&qp->scq->lock);
	qp->sq_head = qp->sq_send = qp->sq_tail = 0;
	qp->rq_head = qp->rq_tail = 0;
	qp->retry_since_ns = qp->retry_at_ns = 0;
	/* A write still in progress belongs to the old queue: tx_wqe() sees
	 * tx_busy cleared and leaves the new one alone. */
	qp->tx_busy = qp->held = false;
	qp->sq_stalled = false;
	qp->pace_set = false;
	/* the path behind the port can stay broken while the QP is made anew */
	if (!(qp->link_cut && sv_eng.cfg.fault_cut_keep)) {
		qp->link_cut = false;
		qp->bytes_sent = 0;
	}
	if (qp->out) {
		sv_conn_kill(qp->out);
		sv_conn_put(qp->out);
		qp->out = NULL;
	}
	memset(&qp->attr, 0, sizeof(qp->attr));
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_4096;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sv_qp *qp = to_qp(ibqp);
	struct sv_device *d = qp->ctx->dev;
	enum ibv_qp_state cur, next;
	struct sv_trans t;
	int port, rc = EINVAL;

	pthread_mutex_lock(&sv_eng.lock);
	cur = qp->attr.qp_state;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		goto out;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	t = sv_transition(cur, next);
	if (!t.valid || (mask & t.req) != t.req || (mask & ~(t.req | t.opt | IBV_QP_STATE)))
		goto out;

	port = (mask & IBV_QP_PORT) ? attr->port_num : qp->attr.port_num;
	if ((mask & IBV_QP_PORT) && sv_port_check(d, attr->port_num))
		goto out;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= sv_pkey_table_len(d))
		goto out;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		goto out;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
		goto out;
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > 0xffffff)
		goto out;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > SV_MAX_RD_ATOM)
		goto out;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > SV_MAX_RD_ATOM)
		goto out;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		goto out;
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31)
		goto out;
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7)
		goto out;
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7)
		goto out;
	if ((mask & IBV_QP_AV) && (port < 1 || check_av(qp, &attr->ah_attr, port)))
		goto out;

	if (next == IBV_QPS_RESET) {
		qp_reset(qp);
		rc = 0;
		goto out;
	}
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN) {
		qp->attr.rq_psn = attr->rq_psn & 0xffffff;
		qp->resp_psn = qp->attr.rq_psn;
	}
	if (mask & IBV_QP_SQ_PSN) {
		qp->attr.sq_psn = attr->sq_psn & 0xffffff;
		qp->next_psn = qp->attr.sq_psn;
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY) {
		qp->attr.rnr_retry = attr->rnr_retry;
		qp->rnr_left = attr->rnr_retry;
	}
	if (mask & IBV_QP_AV) {
		qp->attr.ah_attr = attr->ah_attr;
		qp->attr.ah_attr.port_num = (uint8_t)port;
	}
	if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = attr->path_mig_state;
	if (next == IBV_QPS_ERR) {
		sv_qp_to_error(qp);
	} else {
		qp->attr.qp_state = next;
		qp->ibqp.state = next;
	}
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT)
		qp_set_flow(qp);
	if (next == IBV_QPS_RTS)
		pthread_cond_broadcast(&sv_eng.tx_cond);
	rc = 0;
out:
	pthread_mutex_unlock(&sv_eng.lock);
	return rc;
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			   struct ibv_qp_init_attr *init)
{
	struct sv_qp *qp = to_qp(ibqp);

	pthread_mutex_lock(&sv_eng.lock);
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	attr->cap = qp->cap;
	attr->sq_psn = qp->next_psn;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = qp->cap;
	init->qp_type = IBV_QPT_RC;
	init->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&sv_eng.lock);
	return 0;
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = to_qp(ibqp);
	uint64_t deadline = sv_now_ns() + 2000000000ull;
	struct sv_qp **pp;

	pthread_mutex_lock(&sv_eng.lock);
	qp->destroyed = true;
	/* Our own requests die with the QP: shut their connection so that a
	 * write blocked on it (a peer that stopped reading) returns now and
	 * the wait below stays short. */
	if (qp->out)
		sv_conn_kill(qp->out);
	/* Let queued ACKs and READ responses for this QP go out first: a peer
	 * waiting on them must not see us vanish before they are sent. */
	pthread_cond_broadcast(&sv_eng.tx_cond);
	while (qp->refs && sv_now_ns() < deadline) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&sv_eng.idle_cond, &sv_eng.lock, &ts);
	}
	if (qp->refs)
		sv_log("destroy QP 0x%06x: still busy after 2 s", ibqp->qp_num);
	for (struct sv_conn *c = sv_eng.conns; c; c = c->next) {
		if (c->qp == qp) {
			c->qp = NULL;
			sv_conn_kill(c);
		}
	}
	if (qp->out) {
		sv_conn_kill(qp->out);
		sv_conn_put(qp->out);
		qp->out = NULL;
	}
	for (pp = &sv_eng.qps; *pp; pp = &(*pp)->next) {
		if (*pp == qp) {
			*pp = qp->next;
			break;
		}
	}
	sv_cq_forget_qp(qp->scq, qp);
	qp->scq->nqps--;
	qp->rcq->nqps--;
	sv_stats_qp_release(qp->stats);
	pthread_mutex_unlock(&sv_eng.lock);
	sv_qpn_free(qp->qpfile);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp->rq);
	free(qp->rq_sge);
	free(qp);
	return 0;
}

/*
 * Inline data is copied at post time: the buffer is the caller's again once
 * ibv_post_send() returns, and its lkey is never looked at. An SGE of
 * length 0 may have a NULL address, and a QP with max_inline_data 0 has no
 * inline buffer at all: memcpy() with either is undefined even for 0 bytes.
 */
static void copy_inline(struct sv_swqe *w, const struct ibv_send_wr *wr)
{
	uint64_t off = 0;

	for (int i = 0; i < wr->num_sge; i++) {
		if (!wr->sg_list[i].length)
			continue;
		memcpy(w->inline_buf + off, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		off += wr->sg_list[i].length;
	}
}

static int post_one_send(struct sv_qp *qp, struct ibv_send_wr *wr)
{
	struct sv_swqe *w;
	uint64_t len = 0;

	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ: break;
	default: return EINVAL; /* no atomics, no memory windows */
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	/* A slot is free once a completion of its WR, or of a later one, has
	 * been polled: unsignaled WRs hold theirs until then. */
	if (qp->sq_tail - __atomic_load_n(&qp->sq_polled, __ATOMIC_ACQUIRE) >= qp->sq_size)
		return ENOMEM;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (len > sv_max_msg(qp->ctx->dev->index))
		return EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    (wr->opcode == IBV_WR_RDMA_READ || len > qp->cap.max_inline_data))
		return EINVAL;

	w = &qp->sq[qp->sq_tail % qp->sq_size];
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->imm = wr->imm_data;
	w->raddr = wr->wr.rdma.remote_addr;
	w->rkey = wr->wr.rdma.rkey;
	w->num_sge = (uint32_t)wr->num_sge;
	w->len = len;
	w->psn = qp->next_psn;
	qp->next_psn = (qp->next_psn + 1) & 0xffffff;
	w->post_ns = sv_now_ns();
	if (wr->send_flags & IBV_SEND_INLINE) {
		copy_inline(w, wr);
		if (qp->stats)
			__atomic_fetch_add(&qp->stats->inline_msgs, 1, __ATOMIC_RELAXED);
	} else if (wr->num_sge) {
		memcpy(w->sge, wr->sg_list, sizeof(*w->sge) * (size_t)wr->num_sge);
	}
	if (qp->stats &&
	    (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM || wr->opcode == IBV_WR_SEND_WITH_IMM))
		__atomic_fetch_add(&qp->stats->imm_msgs, 1, __ATOMIC_RELAXED);
	qp->sq_tail++;
	return 0;
}

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sv_qp *qp = to_qp(ibqp);
	int rc = 0;

	pthread_mutex_lock(&sv_eng.lock);
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_ERR) {
		rc = EINVAL;
		*bad = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		rc = post_one_send(qp, wr);
		if (rc) {
			*bad = wr;
			break;
		}
		/* In ERR every new WR completes at once, flushed. */
		if (qp->attr.qp_state == IBV_QPS_ERR)
			sv_qp_complete_send(qp, IBV_WC_WR_FLUSH_ERR);
	}
	pthread_cond_broadcast(&sv_eng.tx_cond);
out:
	pthread_mutex_unlock(&sv_eng.lock);
	/* A caller descheduled right after posting (a loaded machine): the
	 * WRs go out, complete and the peer reacts before this returns. */
	if (sv_eng.cfg.post_send_delay_us > 0)
		usleep((useconds_t)sv_eng.cfg.post_send_delay_us);
	return rc;
}

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_qp *qp = to_qp(ibqp);
	int rc = 0;

	pthread_mutex_lock(&sv_eng.lock);
	if (qp->attr.qp_state == IBV_QPS_RESET) {
		rc = EINVAL;
		*bad = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		struct sv_rwqe *r;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_recv_sge) {
			rc = EINVAL;
			*bad = wr;
			break;
		}
		if (qp->rq_tail - qp->rq_head >= qp->rq_size) {
			rc = ENOMEM;
			*bad = wr;
			break;
		}
		r = &qp->rq[qp->rq_tail % qp->rq_size];
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		/* A receive with no SGE is legal (it takes WRITE_WITH_IMM's
		 * immediate only) and its sg_list may be NULL: memcpy() from
		 * NULL is undefined even for 0 bytes. */
		if (wr->num_sge)
			memcpy(r->sge, wr->sg_list, sizeof(*r->sge) * (size_t)wr->num_sge);
		qp->rq_tail++;
		if (qp->attr.qp_state == IBV_QPS_ERR) {
			struct sv_rwqe done;

			sv_qp_pop_recv(qp, &done);
			sv_qp_complete_recv(qp, &done, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, NULL);
		}
	}
out:
	pthread_mutex_unlock(&sv_eng.lock);
	return rc;
}
