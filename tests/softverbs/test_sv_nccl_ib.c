// SPDX-License-Identifier: MIT
/*
 * softverbs cmocka test: NCCL's own IB transport (src/transport/net_ib,
 * p2p.cc and connect.cc), replayed on softverbs. It posts exactly the work
 * requests NCCL posts, with NCCL's default settings, between two processes:
 *
 * - QPs as NCCL makes them: 1 QP per connection, max_send_sge and
 *   max_recv_sge 1, max_inline_data 0 (NCCL_IB_USE_INLINE off), access
 *   REMOTE_WRITE on the sender and REMOTE_WRITE|REMOTE_ATOMIC|REMOTE_READ on
 *   the receiver, max_dest_rd_atomic 1, min_rnr_timer 12, NCCL_IB_TIMEOUT
 *   20, NCCL_IB_RETRY_CNT 7, rnr_retry 7, max_rd_atomic 1; the RoCEv2 IPv4
 *   GID NCCL picks, hop limit 255; no GRH on IB.
 * - The receiver: a receive WR with num_sge 0 and sg_list NULL, then its
 *   CTS, an RDMA WRITE into the sender's FIFO slot, signaled only for slot
 *   0 (so its send queue must hold twice the FIFO, as NCCL sizes it).
 * - The sender: one unsignaled RDMA WRITE per receive, chained, then the
 *   signaled WRITE_WITH_IMM carrying the size: for a multi-receive it writes
 *   the sizes array into the receiver's completion records; with adaptive
 *   routing (NCCL's default on IB) a single receive above 8 KiB ends with a
 *   zero-length WRITE_WITH_IMM whose WR was memset to 0 (remote_addr 0, rkey
 *   0, num_sge 0, sg_list NULL); a 0-byte send is a WRITE_WITH_IMM with
 *   num_sge 0 and the receive's rkey.
 * - The receiver's GPU flush: a 1-byte RDMA READ of the received buffer over
 *   a QP connected to itself.
 *
 * Every byte of every receive buffer is checked (and the bytes after it
 * left alone), and every completion: status, opcode, wr_id, byte_len,
 * immediate. The FIFO wraps once. This is written from NCCL's sources, not
 * copied, and it is our stand-in for running NCCL itself, which needs a GPU.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "tests/softverbs/sv_test_util.h"

/* NCCL's constants (net_ib): receives per multi-receive, FIFO slots
 * (NCCL_NET_MAX_REQUESTS * NCCL_NET_IB_MAX_RECVS), the adaptive routing
 * threshold (NCCL_IB_AR_THRESHOLD), and the QP attributes it sets. */
#define NIB_MAX_RECVS 8
#define NIB_MAX_REQUESTS 256
#define NIB_AR_THRESHOLD 8192
#define NIB_TIMEOUT 20
#define NIB_RETRY_CNT 7
#define NIB_ROCE_GID 3            /* ::ffff:IPv4, RoCEv2: NCCL's choice */
#define NIB_FLUSH_WR_ID 0x100000u /* flush wr_ids: offset + request */
#define NIB_ACC_BUF (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

#define NIB_ITERS (NIB_MAX_REQUESTS + 8) /* the FIFO wraps once */
#define NIB_BUF ((1u << 20) + 4096)      /* largest receive */
#define NIB_GUARD 64                     /* checked untouched after it */
#define NIB_BIG_ITER 7                   /* the one 1 MiB message */
#define WAIT_MS 10000

/* One CTS FIFO entry, 64 bytes as NCCL's: where the receive lands. */
struct nib_cts {
	uint64_t addr;
	uint64_t size;
	uint32_t rkeys[4];
	uint32_t nreqs;
	uint32_t tag;
	uint64_t idx;
	uint8_t pad[16];
} __attribute__((aligned(64)));

/* Completion record of a slot: the sizes a multi-receive got. */
struct nib_record {
	int32_t sizes[NIB_MAX_RECVS];
};

/* One receive request of the schedule: its receive sizes and the sizes the
 * sender sends into them (never more). */
struct nib_msg {
	int nreqs;
	uint32_t recv_size[NIB_MAX_RECVS];
	uint32_t send_size[NIB_MAX_RECVS];
};

/* What each side tells the other out of band (NCCL's connection metadata). */
struct nib_info {
	struct svt_addr addr;
	uint64_t raddr; /* sender: CTS FIFO; receiver: completion records */
	uint32_t rkey;
};

struct nib_cfg {
	const char *dev;
	bool ar; /* adaptive routing: NCCL's default is on for IB */
};

static bool xwrite(int fd, const void *p, size_t n)
{
	return write(fd, p, n) == (ssize_t)n;
}

static uint8_t pattern(int iter, int r, size_t k)
{
	return (uint8_t)(k * 31 + (size_t)iter * 7 + (size_t)r * 13 + (k >> 8));
}

/* The schedule both sides follow: above and at the AR threshold, small,
 * 0 bytes, multi-receives with an empty request among them, and once 1 MiB. */
static void nib_schedule(int iter, struct nib_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->nreqs = 1;
	switch (iter % 6) {
	case 0:
		m->recv_size[0] = 65536;
		m->send_size[0] = NIB_AR_THRESHOLD + 1 + (uint32_t)(iter % 50) * 997;
		break;
	case 1:
		m->recv_size[0] = NIB_AR_THRESHOLD;
		m->send_size[0] = NIB_AR_THRESHOLD;
		break;
	case 2:
		m->recv_size[0] = 4096;
		m->send_size[0] = 100 + (uint32_t)iter;
		break;
	case 3:
		m->recv_size[0] = 4096;
		m->send_size[0] = 0;
		break;
	case 4:
		m->nreqs = 3;
		m->recv_size[0] = 8192;
		m->recv_size[1] = 4096;
		m->recv_size[2] = 65536;
		m->send_size[0] = 5000;
		m->send_size[1] = 0;
		m->send_size[2] = 20000 + (uint32_t)iter;
		break;
	default:
		m->nreqs = NIB_MAX_RECVS;
		for (int r = 0; r < NIB_MAX_RECVS; r++) {
			m->recv_size[r] = 4096 * (uint32_t)(r + 1);
			m->send_size[r] = 500 * (uint32_t)r;
		}
		break;
	}
	if (iter == NIB_BIG_ITER) {
		m->nreqs = 1;
		m->recv_size[0] = NIB_BUF;
		m->send_size[0] = (1u << 20) + 3;
	}
}

static uint32_t nib_tag(int iter, int r)
{
	return (uint32_t)(iter * NIB_MAX_RECVS + r);
}

/* ncclIbQpCreate(): 1 SGE each way, no inline data. */
static struct ibv_qp *nib_create_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t max_send,
				    uint32_t max_recv)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = max_send,
			 .max_recv_wr = max_recv,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = 0 },
	};

	return ibv_create_qp(pd, &ia);
}

/* ncclIbQpInit(), ncclIbQpRtr() and ncclIbQpRts() with NCCL's defaults. */
static int nib_connect(struct ibv_qp *qp, int access, const struct svt_addr *peer, bool roce)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = access,
	};
	int rc;

	rc = ibv_modify_qp(qp, &a,
			   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	a.ah_attr.sl = 0;
	if (roce) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.sgid_index = NIB_ROCE_GID;
		a.ah_attr.grh.hop_limit = 255;
		a.ah_attr.grh.traffic_class = 0;
		a.ah_attr.grh.flow_label = 0;
	} else {
		a.ah_attr.dlid = peer->lid;
	}
	rc = ibv_modify_qp(qp, &a,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = NIB_TIMEOUT;
	a.retry_cnt = NIB_RETRY_CNT;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void nib_addr(struct ibv_context *ctx, struct ibv_qp *qp, bool roce, struct svt_addr *a)
{
	struct ibv_port_attr pa;

	memset(a, 0, sizeof(*a));
	a->qpn = qp->qp_num;
	if (ibv_query_port(ctx, 1, &pa) == 0)
		a->lid = pa.lid;
	ibv_query_gid(ctx, 1, roce ? NIB_ROCE_GID : 0, &a->gid);
}

/* ---- the sender (child process): ncclIbIsend() and ncclIbMultiSend() ---- */

struct nib_send {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct nib_cts *fifo; /* [slot][r], written by the receiver */
	struct ibv_mr *fifo_mr;
	struct nib_record *sizes; /* [slot]: source of the sizes write */
	struct ibv_mr *sizes_mr;
	uint8_t *buf[NIB_MAX_RECVS];
	struct ibv_mr *buf_mr[NIB_MAX_RECVS];
	struct nib_info peer;
	bool roce, ar;
};

#define SEND_FAIL(...)                                   \
	do {                                             \
		fprintf(stderr, "sender: " __VA_ARGS__); \
		fputc('\n', stderr);                     \
		return 1;                                \
	} while (0)

static int sender_open(struct nib_send *s, const struct nib_cfg *cfg)
{
	struct ibv_port_attr pa;

	memset(s, 0, sizeof(*s));
	s->ar = cfg->ar;
	s->ctx = svt_open(cfg->dev);
	if (!s->ctx || ibv_query_port(s->ctx, 1, &pa))
		SEND_FAIL("cannot open %s", cfg->dev);
	s->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, NIB_MAX_REQUESTS, NULL, NULL, 0) : NULL;
	/* Up to NIB_MAX_RECVS + 1 WRs per send; all but the last unsignaled. */
	s->qp = s->cq ? nib_create_qp(s->pd, s->cq, 2 * NIB_MAX_REQUESTS, 0) : NULL;
	s->fifo = aligned_alloc(64, sizeof(*s->fifo) * NIB_MAX_REQUESTS * NIB_MAX_RECVS);
	s->sizes = calloc(NIB_MAX_REQUESTS, sizeof(*s->sizes));
	if (!s->qp || !s->fifo || !s->sizes)
		SEND_FAIL("cannot create the PD, CQ, QP or FIFO");
	memset(s->fifo, 0, sizeof(*s->fifo) * NIB_MAX_REQUESTS * NIB_MAX_RECVS);
	s->fifo_mr = ibv_reg_mr(s->pd, s->fifo, sizeof(*s->fifo) * NIB_MAX_REQUESTS * NIB_MAX_RECVS,
				NIB_ACC_BUF);
	s->sizes_mr = ibv_reg_mr(s->pd, s->sizes, sizeof(*s->sizes) * NIB_MAX_REQUESTS,
				 NIB_ACC_BUF);
	if (!s->fifo_mr || !s->sizes_mr)
		SEND_FAIL("cannot register the FIFO or the sizes");
	for (int r = 0; r < NIB_MAX_RECVS; r++) {
		s->buf[r] = malloc(NIB_BUF);
		s->buf_mr[r] = s->buf[r] ? ibv_reg_mr(s->pd, s->buf[r], NIB_BUF, NIB_ACC_BUF)
					 : NULL;
		if (!s->buf_mr[r])
			SEND_FAIL("cannot register send buffer %d", r);
	}
	return 0;
}

static void sender_close(struct nib_send *s)
{
	for (int r = 0; r < NIB_MAX_RECVS; r++) {
		if (s->buf_mr[r])
			ibv_dereg_mr(s->buf_mr[r]);
		free(s->buf[r]);
	}
	if (s->sizes_mr)
		ibv_dereg_mr(s->sizes_mr);
	if (s->fifo_mr)
		ibv_dereg_mr(s->fifo_mr);
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->sizes);
	free(s->fifo);
}

/* Poll a FIFO entry (bounded) until it carries idx. It sleeps between
 * looks: a spinning thread starves the engine's threads under valgrind's
 * unfair scheduler. */
static bool cts_landed(volatile struct nib_cts *e, uint64_t idx, uint64_t end)
{
	while (e->idx != idx) {
		if (svt_now_ms() > end)
			return false;
		usleep(20);
	}
	return true;
}

/* Wait until the receiver's CTS for this FIFO position has landed, as
 * ncclIbIsend() does by reading the FIFO, and check what it says. */
static int sender_wait_cts(struct nib_send *s, uint64_t head, int iter, const struct nib_msg *m)
{
	volatile struct nib_cts *slots = &s->fifo[(head % NIB_MAX_REQUESTS) * NIB_MAX_RECVS];
	uint64_t end = svt_now_ms() + WAIT_MS;
	int nreqs;

	if (!cts_landed(&slots[0], head + 1, end))
		SEND_FAIL("iteration %d: no CTS in %d ms", iter, WAIT_MS);
	nreqs = (int)slots[0].nreqs;
	if (nreqs != m->nreqs)
		SEND_FAIL("iteration %d: CTS says %d receives, want %d", iter, nreqs, m->nreqs);
	for (int r = 1; r < nreqs; r++)
		if (!cts_landed(&slots[r], head + 1, end))
			SEND_FAIL("iteration %d: CTS entry %d incomplete", iter, r);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (int r = 0; r < nreqs; r++) {
		if (!slots[r].addr || !slots[r].rkeys[0] || slots[r].nreqs != (uint32_t)nreqs)
			SEND_FAIL("iteration %d: CTS entry %d: addr %llx rkey %x", iter, r,
				  (unsigned long long)slots[r].addr, slots[r].rkeys[0]);
		if (slots[r].size != m->recv_size[r] || slots[r].tag != nib_tag(iter, r))
			SEND_FAIL("iteration %d: CTS entry %d: size %llu tag %u", iter, r,
				  (unsigned long long)slots[r].size, slots[r].tag);
	}
	return 0;
}

/* ncclIbMultiSend() for one QP: the WR list, exactly as NCCL builds it. */
static int sender_post(struct nib_send *s, uint64_t head, int iter, const struct nib_msg *m,
		       uint64_t *wr_id_out)
{
	int slot = (int)(head % NIB_MAX_REQUESTS), nreqs = m->nreqs;
	struct nib_cts *slots = &s->fifo[slot * NIB_MAX_RECVS];
	struct ibv_send_wr wrs[NIB_MAX_RECVS + 1], *last, *bad;
	struct ibv_sge sges[NIB_MAX_RECVS], size_sge;
	uint64_t wr_id = 0;
	int rc;

	for (int r = 0; r < nreqs; r++) {
		struct ibv_send_wr *wr = &wrs[r];

		memset(wr, 0, sizeof(*wr));
		sges[r].addr = (uintptr_t)s->buf[r];
		sges[r].length = m->send_size[r];
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->wr.rdma.remote_addr = slots[r].addr;
		wr->wr.rdma.rkey = slots[r].rkeys[0]; /* even for 0 bytes */
		wr->next = wr + 1;
		wr_id += (uint64_t)(slot & 0xff) << (r * 8);
		wr->wr_id = wr_id;
		wr->sg_list = &sges[r];
		wr->num_sge = 1;
		if (!sges[r].length)
			wr->num_sge = 0; /* sg_list stays set */
		else
			sges[r].lkey = s->buf_mr[r]->lkey;
		s->sizes[slot].sizes[r] = (int32_t)m->send_size[r];
	}
	last = &wrs[nreqs - 1];
	if (nreqs > 1 || (s->ar && m->send_size[0] > NIB_AR_THRESHOLD)) {
		/* The bulk goes as plain RDMA WRITEs; a last WR carries the imm:
		 * the sizes array for a multi-receive, else nothing at all. */
		last++;
		memset(last, 0, sizeof(*last));
		if (nreqs > 1) {
			size_sge.addr = (uintptr_t)&s->sizes[slot];
			size_sge.length = (uint32_t)(nreqs * (int)sizeof(int32_t));
			size_sge.lkey = s->sizes_mr->lkey;
			last->sg_list = &size_sge;
			last->num_sge = 1;
			last->wr.rdma.remote_addr = s->peer.raddr +
						    (uint64_t)slot * sizeof(struct nib_record);
			last->wr.rdma.rkey = s->peer.rkey;
		}
	}
	last->wr_id = wr_id;
	last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	last->imm_data = htobe32(m->send_size[0]);
	last->next = NULL;
	last->send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(s->qp, wrs, &bad);
	if (rc)
		SEND_FAIL("iteration %d: ibv_post_send: %s", iter, strerror(rc));
	*wr_id_out = wr_id;
	return 0;
}

static int sender_wait_done(struct nib_send *s, int iter, uint64_t wr_id)
{
	struct ibv_wc wc;

	if (svt_wait_wc(s->cq, &wc, WAIT_MS))
		SEND_FAIL("iteration %d: no send completion in %d ms", iter, WAIT_MS);
	if (wc.status != IBV_WC_SUCCESS)
		SEND_FAIL("iteration %d: send completion '%s'", iter, ibv_wc_status_str(wc.status));
	if (wc.opcode != IBV_WC_RDMA_WRITE || wc.wr_id != wr_id || wc.qp_num != s->qp->qp_num)
		SEND_FAIL("iteration %d: send completion opcode %d wr_id %llx, want %llx", iter,
			  wc.opcode, (unsigned long long)wc.wr_id, (unsigned long long)wr_id);
	return 0;
}

static int sender_run(struct nib_send *s)
{
	for (int iter = 0; iter < NIB_ITERS; iter++) {
		uint64_t head = (uint64_t)iter, wr_id;
		struct nib_msg m;
		int rc;

		nib_schedule(iter, &m);
		rc = sender_wait_cts(s, head, iter, &m);
		if (rc)
			return rc;
		for (int r = 0; r < m.nreqs; r++)
			for (uint32_t k = 0; k < m.send_size[r]; k++)
				s->buf[r][k] = pattern(iter, r, k);
		rc = sender_post(s, head, iter, &m, &wr_id);
		if (!rc)
			rc = sender_wait_done(s, iter, wr_id);
		if (rc)
			return rc;
	}
	if (!svt_no_wc(s->cq, 20))
		SEND_FAIL("a completion for an unsignaled WR");
	return 0;
}

static int sender_main(int sock, const void *arg)
{
	const struct nib_cfg *cfg = arg;
	struct nib_send s;
	struct nib_info mine;
	char c;
	int rc;

	memset(&mine, 0, sizeof(mine)); /* padding goes over the socket */
	rc = sender_open(&s, cfg);
	if (rc)
		goto out;
	nib_addr(s.ctx, s.qp, s.roce, &mine.addr);
	mine.raddr = (uintptr_t)s.fifo;
	mine.rkey = s.fifo_mr->rkey;
	rc = 1;
	if (!xwrite(sock, &mine, sizeof(mine)) ||
	    !svt_read_within(sock, &s.peer, sizeof(s.peer), WAIT_MS)) {
		fprintf(stderr, "sender: no connection metadata from the receiver\n");
		goto out;
	}
	if (nib_connect(s.qp, IBV_ACCESS_REMOTE_WRITE, &s.peer.addr, s.roce)) {
		fprintf(stderr, "sender: cannot bring the QP to RTS\n");
		goto out;
	}
	if (!xwrite(sock, "r", 1) || !svt_read_within(sock, &c, 1, WAIT_MS))
		goto out;
	rc = sender_run(&s);
	if (!rc && (!xwrite(sock, "d", 1) || !svt_read_within(sock, &c, 1, WAIT_MS)))
		rc = 1;
out:
	sender_close(&s);
	return rc;
}

/* ---- the receiver (this process): ncclIbIrecv(), ncclIbPostFifo(),
 * ncclIbIflush() and the completions ncclIbTest() polls ---- */

struct nib_recv {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq; /* data, CTS and flush completions */
	struct ibv_qp *qp, *flush_qp;
	struct nib_cts *cts; /* [slot][r], local copy of the CTS */
	struct ibv_mr *cts_mr;
	struct nib_record *records; /* [slot], written by the sender */
	struct ibv_mr *records_mr;
	int flush_mem; /* GPU flush target */
	struct ibv_mr *flush_mr;
	uint8_t *buf[NIB_MAX_RECVS];
	struct ibv_mr *buf_mr[NIB_MAX_RECVS];
	struct nib_info peer;
	bool roce;
	int cts_signaled, cts_done;
};

static void receiver_open(struct nib_recv *v, const char *dev)
{
	struct ibv_port_attr pa;

	memset(v, 0, sizeof(*v));
	v->ctx = svt_open(dev);
	assert_non_null(v->ctx);
	assert_int_equal(ibv_query_port(v->ctx, 1, &pa), 0);
	v->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	v->pd = ibv_alloc_pd(v->ctx);
	assert_non_null(v->pd);
	/* Up to two completions (CTS and receive) per request. */
	v->cq = ibv_create_cq(v->ctx, 2 * NIB_MAX_REQUESTS, NULL, NULL, 0);
	assert_non_null(v->cq);
	/* Only one CTS in NIB_MAX_REQUESTS is signaled, and every WR holds
	 * its slot until a later completion is polled: twice the FIFO. */
	v->qp = nib_create_qp(v->pd, v->cq, 2 * NIB_MAX_REQUESTS, NIB_MAX_REQUESTS);
	v->flush_qp = nib_create_qp(v->pd, v->cq, NIB_MAX_REQUESTS, 0);
	assert_non_null(v->qp);
	assert_non_null(v->flush_qp);
	v->cts = aligned_alloc(64, sizeof(*v->cts) * NIB_MAX_REQUESTS * NIB_MAX_RECVS);
	v->records = calloc(NIB_MAX_REQUESTS, sizeof(*v->records));
	assert_non_null(v->cts);
	assert_non_null(v->records);
	memset(v->cts, 0, sizeof(*v->cts) * NIB_MAX_REQUESTS * NIB_MAX_RECVS);
	v->cts_mr = ibv_reg_mr(v->pd, v->cts, sizeof(*v->cts) * NIB_MAX_REQUESTS * NIB_MAX_RECVS,
			       NIB_ACC_BUF);
	v->records_mr = ibv_reg_mr(v->pd, v->records, sizeof(*v->records) * NIB_MAX_REQUESTS,
				   NIB_ACC_BUF);
	v->flush_mr = ibv_reg_mr(v->pd, &v->flush_mem, sizeof(v->flush_mem),
				 IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(v->cts_mr);
	assert_non_null(v->records_mr);
	assert_non_null(v->flush_mr);
	for (int r = 0; r < NIB_MAX_RECVS; r++) {
		v->buf[r] = malloc(NIB_BUF + NIB_GUARD);
		assert_non_null(v->buf[r]);
		v->buf_mr[r] = ibv_reg_mr(v->pd, v->buf[r], NIB_BUF + NIB_GUARD, NIB_ACC_BUF);
		assert_non_null(v->buf_mr[r]);
	}
}

static void receiver_close(struct nib_recv *v)
{
	for (int r = 0; r < NIB_MAX_RECVS; r++) {
		ibv_dereg_mr(v->buf_mr[r]);
		free(v->buf[r]);
	}
	ibv_dereg_mr(v->flush_mr);
	ibv_dereg_mr(v->records_mr);
	ibv_dereg_mr(v->cts_mr);
	ibv_destroy_qp(v->flush_qp);
	ibv_destroy_qp(v->qp);
	ibv_destroy_cq(v->cq);
	ibv_dealloc_pd(v->pd);
	ibv_close_device(v->ctx);
	free(v->records);
	free(v->cts);
}

/* The flush QP is a loopback: connected to itself. */
static void receiver_connect(struct nib_recv *v)
{
	struct svt_addr self;

	assert_int_equal(nib_connect(v->qp,
				     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
					     IBV_ACCESS_REMOTE_READ,
				     &v->peer.addr, v->roce),
			 0);
	nib_addr(v->ctx, v->flush_qp, v->roce, &self);
	assert_int_equal(nib_connect(v->flush_qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
				     &self, v->roce),
			 0);
}

/* ncclIbIrecv(): post the receive (no SGE), fill the CTS, ncclIbPostFifo(). */
static void receiver_post(struct nib_recv *v, uint64_t head, int iter, const struct nib_msg *m)
{
	int slot = (int)(head % NIB_MAX_REQUESTS);
	struct nib_cts *elem = &v->cts[slot * NIB_MAX_RECVS];
	struct ibv_recv_wr rwr = { .wr_id = (uint64_t)slot, .sg_list = NULL, .num_sge = 0 }, *rbad;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	for (int r = 0; r < m->nreqs; r++)
		memset(v->buf[r], 0xee, m->recv_size[r] + NIB_GUARD);
	memset(&v->records[slot], 0, sizeof(v->records[slot]));
	assert_int_equal(ibv_post_recv(v->qp, &rwr, &rbad), 0);
	for (int r = 0; r < m->nreqs; r++) {
		elem[r].addr = (uintptr_t)v->buf[r];
		elem[r].rkeys[0] = v->buf_mr[r]->rkey;
		elem[r].nreqs = (uint32_t)m->nreqs;
		elem[r].size = m->recv_size[r];
		elem[r].tag = nib_tag(iter, r);
		elem[r].idx = head + 1;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr.rdma.remote_addr = v->peer.raddr +
				 (uint64_t)slot * NIB_MAX_RECVS * sizeof(struct nib_cts);
	wr.wr.rdma.rkey = v->peer.rkey;
	sge.addr = (uintptr_t)elem;
	sge.length = (uint32_t)m->nreqs * sizeof(struct nib_cts);
	sge.lkey = v->cts_mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = 0; /* NCCL_IB_USE_INLINE off */
	if (slot == 0) {   /* slot == devIndex: drains the send queue */
		wr.send_flags |= IBV_SEND_SIGNALED;
		wr.wr_id = (uint64_t)slot;
		v->cts_signaled++;
	}
	assert_int_equal(ibv_post_send(v->qp, &wr, &bad), 0);
}

/* Poll (bounded) for the next completion of the given opcode; the CTS
 * completions that come in between are checked and counted. A sender that
 * died is reported at once. */
static void receiver_wait(struct nib_recv *v, enum ibv_wc_opcode want, struct ibv_wc *out)
{
	uint64_t end = svt_now_ms() + WAIT_MS;
	int st;

	for (;;) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(v->cq, 1, &wc);

		assert_true(n >= 0);
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				fail_msg("receiver: wr_id %llx completed with '%s'",
					 (unsigned long long)wc.wr_id,
					 ibv_wc_status_str(wc.status));
			if (wc.opcode == want) {
				*out = wc;
				return;
			}
			if (wc.opcode != IBV_WC_RDMA_WRITE)
				fail_msg("receiver: unexpected completion, opcode %d", wc.opcode);
			assert_int_equal(wc.wr_id, 0); /* the CTS of slot 0 */
			assert_int_equal(wc.qp_num, v->qp->qp_num);
			v->cts_done++;
			continue;
		}
		if (svt_child > 0 && waitpid(svt_child, &st, WNOHANG) == svt_child) {
			svt_child = -1;
			fail_msg("receiver: the sender exited (status 0x%x)", st);
		}
		if (svt_now_ms() > end)
			fail_msg("receiver: no completion with opcode %d in %d ms", want, WAIT_MS);
		usleep(50);
	}
}

static void receiver_check_data(struct nib_recv *v, int iter, const struct nib_msg *m)
{
	for (int r = 0; r < m->nreqs; r++) {
		const uint8_t *b = v->buf[r];

		for (uint32_t k = 0; k < m->send_size[r]; k++)
			if (b[k] != pattern(iter, r, k))
				fail_msg("iteration %d, receive %d: byte %u is 0x%02x, want 0x%02x",
					 iter, r, k, b[k], pattern(iter, r, k));
		for (uint32_t k = m->send_size[r]; k < m->recv_size[r] + NIB_GUARD; k++)
			if (b[k] != 0xee)
				fail_msg("iteration %d, receive %d: byte %u written past %u", iter,
					 r, k, m->send_size[r]);
	}
}

/* The receive completion of a request, by the shape NCCL's sender used. */
static void receiver_check_wc(struct nib_recv *v, int iter, bool ar, const struct nib_msg *m,
			      const struct ibv_wc *wc)
{
	int slot = iter % NIB_MAX_REQUESTS;
	uint32_t len;

	if (m->nreqs > 1)
		len = (uint32_t)m->nreqs * sizeof(int32_t); /* the sizes array */
	else if (ar && m->send_size[0] > NIB_AR_THRESHOLD)
		len = 0; /* memset-zero tail */
	else
		len = m->send_size[0];
	assert_int_equal(wc->wr_id, slot);
	assert_int_equal(wc->qp_num, v->qp->qp_num);
	assert_int_equal(wc->src_qp, v->peer.addr.qpn);
	if (wc->byte_len != len)
		fail_msg("iteration %d: receive byte_len %u, want %u", iter, wc->byte_len, len);
	assert_true(wc->wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(be32toh(wc->imm_data), m->send_size[0]);
	for (int r = 0; m->nreqs > 1 && r < m->nreqs; r++)
		assert_int_equal(v->records[slot].sizes[r], (int32_t)m->send_size[r]);
	for (int r = m->nreqs; m->nreqs > 1 && r < NIB_MAX_RECVS; r++)
		assert_int_equal(v->records[slot].sizes[r], 0);
}

/* ncclIbIflush(): a 1-byte READ of the last non-empty receive, through the
 * loopback QP, into the flush word. */
static void receiver_flush(struct nib_recv *v, int iter, const struct nib_msg *m)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = { .addr = (uintptr_t)&v->flush_mem,
			       .length = 1,
			       .lkey = v->flush_mr->lkey };
	struct ibv_wc wc;
	int last = -1;

	for (int r = 0; r < m->nreqs; r++)
		if (m->send_size[r])
			last = r;
	if (last < 0)
		return;
	v->flush_mem = -1;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = NIB_FLUSH_WR_ID + (uint64_t)(iter % NIB_MAX_REQUESTS);
	wr.wr.rdma.remote_addr = (uintptr_t)v->buf[last];
	wr.wr.rdma.rkey = v->buf_mr[last]->rkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	assert_int_equal(ibv_post_send(v->flush_qp, &wr, &bad), 0);
	receiver_wait(v, IBV_WC_RDMA_READ, &wc);
	assert_int_equal(wc.wr_id, wr.wr_id);
	assert_int_equal(wc.qp_num, v->flush_qp->qp_num);
	assert_int_equal(wc.byte_len, 1);
	assert_int_equal(((uint8_t *)&v->flush_mem)[0], v->buf[last][0]);
	for (size_t k = 1; k < sizeof(v->flush_mem); k++)
		assert_int_equal(((uint8_t *)&v->flush_mem)[k], 0xff);
}

static void receiver_run(struct nib_recv *v, bool ar)
{
	for (int iter = 0; iter < NIB_ITERS; iter++) {
		struct nib_msg m;
		struct ibv_wc wc;

		nib_schedule(iter, &m);
		receiver_post(v, (uint64_t)iter, iter, &m);
		receiver_wait(v, IBV_WC_RECV_RDMA_WITH_IMM, &wc);
		receiver_check_wc(v, iter, ar, &m, &wc);
		receiver_check_data(v, iter, &m);
		receiver_flush(v, iter, &m);
	}
}

static void run_nccl_ib(const struct nib_cfg *cfg)
{
	struct nib_recv v;
	struct nib_info mine;
	int sock;
	char c;

	sock = svt_fork_peer(sender_main, cfg);
	assert_true(sock >= 0);
	receiver_open(&v, cfg->dev);
	assert_true(svt_read_within(sock, &v.peer, sizeof(v.peer), WAIT_MS));
	memset(&mine, 0, sizeof(mine)); /* padding goes over the socket */
	nib_addr(v.ctx, v.qp, v.roce, &mine.addr);
	mine.raddr = (uintptr_t)v.records;
	mine.rkey = v.records_mr->rkey;
	assert_true(xwrite(sock, &mine, sizeof(mine)));
	receiver_connect(&v);
	assert_true(svt_read_within(sock, &c, 1, WAIT_MS));
	assert_true(xwrite(sock, "r", 1));

	receiver_run(&v, cfg->ar);

	/* Every CTS completion polled: one per pass over slot 0, no more. */
	while (v.cts_done < v.cts_signaled) {
		struct ibv_wc wc;

		assert_int_equal(svt_wait_wc(v.cq, &wc, WAIT_MS), 0);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_int_equal(wc.opcode, IBV_WC_RDMA_WRITE);
		assert_int_equal(wc.wr_id, 0);
		v.cts_done++;
	}
	assert_int_equal(v.cts_signaled, 2);
	assert_int_equal(v.cts_done, v.cts_signaled);
	assert_true(svt_no_wc(v.cq, 20));
	assert_true(svt_read_within(sock, &c, 1, WAIT_MS));
	assert_int_equal(c, 'd');
	assert_true(xwrite(sock, "x", 1));
	assert_int_equal(svt_reap_child(WAIT_MS), 0);
	receiver_close(&v);
	close(sock);
}

/* RoCE: NCCL leaves adaptive routing off by default. */
static void test_nccl_ib_roce(void **state)
{
	const struct nib_cfg cfg = { .dev = "svroce0", .ar = false };

	run_nccl_ib(&cfg);
}

/* IB: adaptive routing is on by default, so every single receive above
 * 8 KiB ends with the memset-zero, rkey-0 WRITE_WITH_IMM. */
static void test_nccl_ib_ib(void **state)
{
	const struct nib_cfg cfg = { .dev = "svib0", .ar = true };

	run_nccl_ib(&cfg);
}

/* RoCE with NCCL_IB_ADAPTIVE_ROUTING=1: the same tail over RoCE. */
static void test_nccl_ib_roce_ar(void **state)
{
	const struct nib_cfg cfg = { .dev = "svroce0", .ar = true };

	run_nccl_ib(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_nccl_ib_roce, svt_child_teardown),
		cmocka_unit_test_teardown(test_nccl_ib_ib, svt_child_teardown),
		cmocka_unit_test_teardown(test_nccl_ib_roce_ar, svt_child_teardown),
	};

	signal(SIGPIPE, SIG_IGN); /* a dead peer shows as a failed read/write */
	return cmocka_run_group_tests(tests, svt_fabric_group_setup, svt_fabric_group_teardown);
}
