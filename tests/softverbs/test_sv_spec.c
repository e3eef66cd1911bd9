// SPDX-License-Identifier: MIT
/*
 * softverbs cmocka tests of each access check against the IB spec (vol. 1,
 * chapters 9 to 11) and the kernel's software RDMA drivers (rxe, rdmavt):
 * what a zero-length access needs, which local and remote keys are checked
 * and when, access rights of MRs and QPs, ranges, inline data, and the send
 * queue slots of unsignaled WRs. One process, two QPs. docs/softverbs.md has
 * the table of checks these tests pin down.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/softverbs/sv_test_util.h"

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define WAIT_MS 5000
#define BUF 4096

static const char *const devs[] = { "svroce0", "svib0" };

/* Test knobs back to their defaults, whatever the previous test did. */
static int reset_knobs(void **state)
{
	svt_max_dest_rd_atomic = 16;
	svt_max_inline_data = 64;
	svt_sq_sig_all = 0;
	return 0;
}

/* The next completion on cq, which must come within WAIT_MS with status st
 * and wr_id; returned for further checks. */
static struct ibv_wc expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	if (svt_wait_wc(cq, &wc, WAIT_MS))
		fail_msg("wr %llu: no completion within %d ms", (unsigned long long)wr_id, WAIT_MS);
	if (wc.status != st)
		fail_msg("wr %llu: status '%s', want '%s'", (unsigned long long)wc.wr_id,
			 ibv_wc_status_str(wc.status), ibv_wc_status_str(st));
	assert_int_equal(wc.wr_id, wr_id);
	return wc;
}

/* expect_wc, and for a success its opcode and byte_len too. */
static void expect_wc_full(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st,
			   enum ibv_wc_opcode op, uint32_t byte_len)
{
	struct ibv_wc wc = expect_wc(cq, wr_id, st);

	if (st != IBV_WC_SUCCESS)
		return;
	assert_int_equal(wc.opcode, op);
	assert_int_equal(wc.byte_len, byte_len);
}

static void expect_async(struct ibv_context *ctx, enum ibv_event_type type, struct ibv_qp *qp)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	assert_int_equal(ibv_get_async_event(ctx, &ev), 0);
	if (ev.event_type != type)
		fail_msg("async event '%s', want '%s'", ibv_event_type_str(ev.event_type),
			 ibv_event_type_str(type));
	assert_ptr_equal(ev.element.qp, qp);
	ibv_ack_async_event(&ev);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;

	assert_int_equal(ibv_query_qp(qp, &at, IBV_QP_STATE, &ia), 0);
	return at.qp_state;
}

/* A WR as NCCL builds its zero-length ones: memset to 0, then the opcode,
 * flags and wr_id filled in. remote_addr 0, rkey 0, num_sge 0, sg_list NULL. */
static int post_zeroed(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, uint32_t imm)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(imm);
	return ibv_post_send(qp, &wr, &bad);
}

static int post_one(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, struct ibv_sge *sge,
		    int nsge, uint64_t raddr, uint32_t rkey, unsigned int flags)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = sge, .num_sge = nsge, .opcode = op,
		.send_flags = flags,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv_sges(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int nsge)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = nsge }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static bool all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/*
 * IBA C9-88: a zero-length RDMA WRITE or READ needs no valid R_Key and its
 * virtual address is not checked. rxe skips check_rkey() for it ("A
 * zero-byte op is not required to set an addr or rkey"), rdmavt skips
 * rvt_rkey_ok() when the RETH length is 0. NCCL's IB transport depends on
 * it: with adaptive routing it ends a send with a zero-length
 * WRITE_WITH_IMM whose WR was memset to 0. That still consumes a receive
 * and completes it with byte_len 0 and the immediate.
 */
static void run_zero_length_rdma(const char *dev)
{
	struct svt_end a, b;
	uint8_t *dst = calloc(1, BUF), *src = malloc(BUF);
	struct ibv_mr *smr, *dmr, *romr, *other_mr;
	struct ibv_pd *other_pd;
	struct ibv_wc wc;

	assert_int_equal(svt_pair(&a, &b, dev), 0);
	memset(src, 0x3c, BUF);
	smr = ibv_reg_mr(a.pd, src, BUF, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, BUF, ACC_ALL);
	romr = ibv_reg_mr(b.pd, dst, BUF, IBV_ACCESS_LOCAL_WRITE);
	other_pd = ibv_alloc_pd(b.ctx);
	other_mr = ibv_reg_mr(other_pd, dst, BUF, ACC_ALL);
	assert_non_null(smr);
	assert_non_null(dmr);
	assert_non_null(romr);
	assert_non_null(other_mr);

	/* RDMA WRITE, memset WR. */
	assert_int_equal(post_zeroed(a.qp, IBV_WR_RDMA_WRITE, 1, 0), 0);
	expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0);

	/* WRITE_WITH_IMM, memset WR, into a zero-SGE receive. */
	assert_int_equal(post_recv_sges(b.qp, 50, NULL, 0), 0);
	assert_int_equal(post_zeroed(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, 0x8001), 0);
	expect_wc_full(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0);
	assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 50);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 0);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(be32toh(wc.imm_data), 0x8001);

	/* RDMA READ, memset WR. */
	assert_int_equal(post_zeroed(a.qp, IBV_WR_RDMA_READ, 3, 0), 0);
	expect_wc_full(a.cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 0);

	/* Whatever the key: one that does not exist, one whose MR lacks the
	 * remote right, one of another PD; addresses outside any MR. */
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_WRITE, 4, NULL, 0, 1, 0xdeadbeef,
				  IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_WRITE, 5, NULL, 0, (uintptr_t)dst + BUF,
				  romr->rkey, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_READ, 6, NULL, 0, UINT64_MAX, other_mr->rkey,
				  IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0);
	expect_wc_full(a.cq, 5, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0);
	expect_wc_full(a.cq, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 0);

	/* None of it touched the responder's memory or broke the QPs. */
	assert_true(all_bytes(dst, BUF, 0));
	assert_int_equal(qp_state(a.qp), IBV_QPS_RTS);
	assert_int_equal(qp_state(b.qp), IBV_QPS_RTS);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 7, src, BUF, smr->lkey,
				       (uintptr_t)dst, dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, BUF);
	assert_true(all_bytes(dst, BUF, 0x3c));
	assert_true(svt_no_wc(b.cq, 20));

	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_dereg_mr(romr);
	ibv_dereg_mr(other_mr);
	ibv_dealloc_pd(other_pd);
	svt_end_fini(&a);
	svt_end_fini(&b);
	free(src);
	free(dst);
}

static void test_zero_length_rdma_needs_no_rkey(void **state)
{
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
		run_zero_length_rdma(devs[i]);
}

/*
 * An RDMA WRITE or READ that the responder's QP does not enable
 * (qp_access_flags, set at INIT) is an invalid request, not an R_Key
 * violation: rxe's check_op_valid() and rdmavt's RC receive (nack_inv) NAK
 * it as Invalid Request, so the requester gets IBV_WC_REM_INV_REQ_ERR; the
 * responder QP goes to ERR with the affiliated "invalid request local work
 * queue error", IBV_EVENT_QP_REQ_ERR. The check comes before the length:
 * it holds for zero-length accesses too.
 */
static void check_invalid_request(enum ibv_wr_opcode op, uint32_t len, int b_access)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	static uint8_t src[BUF], dst[BUF];
	struct ibv_mr *smr, *dmr;

	assert_int_equal(svt_end_init(&a, "svroce0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svroce0", false, 8), 0);
	svt_addr_of(&a, 3, &aa);
	svt_addr_of(&b, 3, &ba);
	assert_int_equal(svt_connect(&a, &ba, 3, ACC_ALL, 14, 7, 7), 0);
	assert_int_equal(svt_connect(&b, &aa, 3, b_access, 14, 7, 7), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	assert_non_null(smr);
	assert_non_null(dmr);
	assert_int_equal(post_recv_sges(b.qp, 70, NULL, 0), 0);

	if (len)
		assert_int_equal(svt_post_rdma(a.qp, op, 1, src, len, smr->lkey, (uintptr_t)dst,
					       dmr->rkey, 5, IBV_SEND_SIGNALED),
				 0);
	else
		assert_int_equal(post_zeroed(a.qp, op, 1, 5), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, src, 8, smr->lkey,
				       (uintptr_t)dst, dmr->rkey, 0, 0),
			 0);
	expect_wc(a.cq, 1, IBV_WC_REM_INV_REQ_ERR);
	expect_wc(a.cq, 2, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(qp_state(a.qp), IBV_QPS_ERR);
	expect_async(b.ctx, IBV_EVENT_QP_REQ_ERR, b.qp);
	expect_wc(b.cq, 70, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(qp_state(b.qp), IBV_QPS_ERR);
	assert_true(all_bytes(dst, sizeof(dst), 0));

	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_qp_access_flags(void **state)
{
	const int lw = IBV_ACCESS_LOCAL_WRITE;

	check_invalid_request(IBV_WR_RDMA_WRITE, 64, lw | IBV_ACCESS_REMOTE_READ);
	check_invalid_request(IBV_WR_RDMA_WRITE_WITH_IMM, 64, IBV_ACCESS_REMOTE_READ);
	check_invalid_request(IBV_WR_RDMA_READ, 64, lw | IBV_ACCESS_REMOTE_WRITE);
	check_invalid_request(IBV_WR_RDMA_WRITE_WITH_IMM, 0, lw | IBV_ACCESS_REMOTE_READ);
	check_invalid_request(IBV_WR_RDMA_READ, 0, 0);
}

/* SENDs need no QP access flag at all (only RDMA and atomics do). */
static void test_send_needs_no_qp_access(void **state)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	static uint8_t src[64], dst[64];
	struct ibv_mr *smr, *dmr;

	assert_int_equal(svt_end_init(&a, "svib0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svib0", false, 8), 0);
	svt_addr_of(&a, -1, &aa);
	svt_addr_of(&b, -1, &ba);
	assert_int_equal(svt_connect(&a, &ba, -1, 0, 14, 7, 7), 0);
	assert_int_equal(svt_connect(&b, &aa, -1, 0, 14, 7, 7), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), 0);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	memset(src, 0x77, sizeof(src));
	assert_int_equal(svt_post_recv(b.qp, 9, dst, sizeof(dst), dmr->lkey), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND_WITH_IMM, 1, src, sizeof(src), smr->lkey,
				       0, 0, 3, IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, sizeof(src));
	expect_wc_full(b.cq, 9, IBV_WC_SUCCESS, IBV_WC_RECV, sizeof(src));
	assert_true(all_bytes(dst, sizeof(dst), 0x77));
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/*
 * A READ at a responder whose max_dest_rd_atomic is 0 has no responder
 * resource to run in: rxe's check_resource() answers
 * RESPST_ERR_TOO_MANY_RDMA_ATM_REQ, an Invalid Request NAK (class C). Writes
 * on that QP still work.
 */
static void test_read_needs_responder_resources(void **state)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	static uint8_t src[BUF], dst[BUF];
	struct ibv_mr *smr, *dmr;

	assert_int_equal(svt_end_init(&a, "svib0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svib0", false, 8), 0);
	svt_addr_of(&a, -1, &aa);
	svt_addr_of(&b, -1, &ba);
	assert_int_equal(svt_connect(&a, &ba, -1, ACC_ALL, 14, 7, 7), 0);
	svt_max_dest_rd_atomic = 0;
	assert_int_equal(svt_connect(&b, &aa, -1, ACC_ALL, 14, 7, 7), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, 64, smr->lkey,
				       (uintptr_t)dst, dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 64);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_READ, 2, src, 64, smr->lkey,
				       (uintptr_t)dst, dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 2, IBV_WC_REM_INV_REQ_ERR);
	expect_async(b.ctx, IBV_EVENT_QP_REQ_ERR, b.qp);
	assert_int_equal(qp_state(b.qp), IBV_QPS_ERR);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/*
 * A local SGE of length 0 names no memory: its lkey is not looked up. rxe's
 * copy_data() skips SGEs of length 0 and returns before any lookup when the
 * message is empty; mlx5 leaves them out of the WQE. So a zero-length SGE
 * with any lkey, in a send, a receive or a READ's destination, is fine, and
 * a message of 0 bytes never checks the receive's SGEs.
 */
static void run_zero_length_sges(const char *dev)
{
	struct svt_end a, b;
	static uint8_t src[64], dst[64], back[64];
	struct ibv_mr *smr, *dmr, *bmr, *romr;
	struct ibv_sge s[3], r[2];
	struct ibv_wc wc;

	assert_int_equal(svt_pair(&a, &b, dev), 0);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i + 1);
	memset(dst, 0, sizeof(dst));
	memset(back, 0, sizeof(back));
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(a.pd, back, sizeof(back), IBV_ACCESS_LOCAL_WRITE);
	romr = ibv_reg_mr(a.pd, back, sizeof(back), 0);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	assert_non_null(smr);
	assert_non_null(bmr);
	assert_non_null(romr);
	assert_non_null(dmr);

	/* SEND: a zero-length SGE with a bad lkey between two good ones,
	 * into a receive that starts with one. */
	s[0] = (struct ibv_sge){ .addr = (uintptr_t)src, .length = 8, .lkey = smr->lkey };
	s[1] = (struct ibv_sge){ .addr = 0, .length = 0, .lkey = 0xdead };
	s[2] = (struct ibv_sge){ .addr = (uintptr_t)src + 8, .length = 8, .lkey = smr->lkey };
	r[0] = (struct ibv_sge){ .addr = 0, .length = 0, .lkey = 0xbeef };
	r[1] = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = sizeof(dst), .lkey = dmr->lkey };
	assert_int_equal(post_recv_sges(b.qp, 20, r, 2), 0);
	assert_int_equal(post_one(a.qp, IBV_WR_SEND, 1, s, 3, 0, 0, IBV_SEND_SIGNALED), 0);
	expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 16);
	expect_wc_full(b.cq, 20, IBV_WC_SUCCESS, IBV_WC_RECV, 16);
	assert_memory_equal(dst, src, 16);
	assert_true(all_bytes(dst + 16, sizeof(dst) - 16, 0));

	/* RDMA WRITE from the same gather list. */
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_WRITE, 2, s, 3, (uintptr_t)dst + 32, dmr->rkey,
				  IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 16);
	assert_memory_equal(dst + 32, src, 16);

	/* READ: zero-length destinations in an MR without LOCAL_WRITE and
	 * with a bad lkey, then a good one. */
	s[0] = (struct ibv_sge){ .addr = (uintptr_t)back, .length = 0, .lkey = romr->lkey };
	s[1] = (struct ibv_sge){ .addr = 0, .length = 0, .lkey = 0xdead };
	s[2] = (struct ibv_sge){ .addr = (uintptr_t)back, .length = 16, .lkey = bmr->lkey };
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_READ, 3, s, 3, (uintptr_t)dst, dmr->rkey,
				  IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 16);
	assert_memory_equal(back, src, 16);

	/* A 0-byte SEND whose only SGE has a bad lkey, into a receive whose
	 * SGE has a bad lkey too: no byte moves, nothing is looked up. */
	s[0] = (struct ibv_sge){ .addr = 0, .length = 0, .lkey = 0xdead };
	r[0] = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = sizeof(dst), .lkey = 0xbad };
	assert_int_equal(post_recv_sges(b.qp, 21, r, 1), 0);
	assert_int_equal(post_one(a.qp, IBV_WR_SEND, 4, s, 1, 0, 0, IBV_SEND_SIGNALED), 0);
	expect_wc_full(a.cq, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 0);
	expect_wc_full(b.cq, 21, IBV_WC_SUCCESS, IBV_WC_RECV, 0);

	/* num_sge 0 and sg_list NULL on both sides. */
	assert_int_equal(post_recv_sges(b.qp, 22, NULL, 0), 0);
	assert_int_equal(post_one(a.qp, IBV_WR_SEND_WITH_IMM, 5, NULL, 0, 0, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 5, IBV_WC_SUCCESS, IBV_WC_SEND, 0);
	assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 22);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 0);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);

	ibv_dereg_mr(smr);
	ibv_dereg_mr(bmr);
	ibv_dereg_mr(romr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_zero_length_sges(void **state)
{
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
		run_zero_length_sges(devs[i]);
}

/* Local SGEs that do name memory: the lkey must be of the QP's PD and the
 * range inside the MR (rxe lookup_mr() and mr_check_range()), else
 * IBV_WC_LOC_PROT_ERR and the QP to ERR. */
static void check_local_prot(bool other_pd)
{
	struct svt_end a, b;
	static uint8_t src[256], dst[256];
	struct ibv_mr *smr, *dmr;
	struct ibv_pd *pd2;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	pd2 = ibv_alloc_pd(a.ctx);
	smr = ibv_reg_mr(other_pd ? pd2 : a.pd, src, 128, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	/* In range and the right PD it works; one byte past the end fails. */
	if (!other_pd) {
		assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, 128, smr->lkey,
					       (uintptr_t)dst, dmr->rkey, 0, IBV_SEND_SIGNALED),
				 0);
		expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 128);
	}
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, src + 1, 128, smr->lkey,
				       (uintptr_t)dst, dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 2, IBV_WC_LOC_PROT_ERR);
	assert_int_equal(qp_state(a.qp), IBV_QPS_ERR);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_dealloc_pd(pd2);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/* A receive SGE into an MR without LOCAL_WRITE: the responder's receive
 * completes with IBV_WC_LOC_PROT_ERR, its QP to ERR (IBV_EVENT_QP_FATAL),
 * the requester gets IBV_WC_REM_OP_ERR (NAK remote operational error). */
static void test_recv_needs_local_write(void **state)
{
	struct svt_end a, b;
	static uint8_t src[64], dst[64];
	struct ibv_mr *smr, *dmr;

	assert_int_equal(svt_pair(&a, &b, "svib0"), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), 0);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), IBV_ACCESS_REMOTE_READ);
	assert_int_equal(svt_post_recv(b.qp, 30, dst, sizeof(dst), dmr->lkey), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, src, 8, smr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_REM_OP_ERR);
	expect_wc(b.cq, 30, IBV_WC_LOC_PROT_ERR);
	expect_async(b.ctx, IBV_EVENT_QP_FATAL, b.qp);
	assert_true(all_bytes(dst, sizeof(dst), 0));
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_local_sge_checks(void **state)
{
	check_local_prot(false);
	check_local_prot(true);
}

/*
 * IBV_SEND_INLINE: the data is copied at post time, so its SGEs name no MR
 * and their lkeys are not checked (rxe copy_inline_data_to_wqe(), mlx5
 * set_data_inl_seg()); the buffer is the caller's again once
 * ibv_post_send() returns. max_inline_data bounds it (EINVAL above), and
 * the verbs define it for SEND and RDMA WRITE only, so a READ is refused.
 * Zero-length inline SGEs may have a NULL address, and a QP created with
 * max_inline_data 0 still takes a 0-byte inline WR.
 */
static void test_inline(void **state)
{
	struct svt_end a, b;
	static uint8_t dst[128];
	uint8_t msg[64];
	struct ibv_mr *dmr;
	struct ibv_sge s[2];

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	assert_non_null(dmr);

	memcpy(msg, "inline-data!", 13);
	s[0] = (struct ibv_sge){ .addr = 0, .length = 0, .lkey = 0 };
	s[1] = (struct ibv_sge){ .addr = (uintptr_t)msg, .length = 13, .lkey = 0xdead };
	assert_int_equal(svt_post_recv(b.qp, 40, dst, sizeof(dst), dmr->lkey), 0);
	assert_int_equal(post_one(a.qp, IBV_WR_SEND, 1, s, 2, 0, 0,
				  IBV_SEND_INLINE | IBV_SEND_SIGNALED),
			 0);
	memset(msg, 0, sizeof(msg)); /* the caller's again */
	expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 13);
	expect_wc_full(b.cq, 40, IBV_WC_SUCCESS, IBV_WC_RECV, 13);
	assert_memory_equal(dst, "inline-data!", 13);

	/* Exactly max_inline_data is fine, one byte more is not. */
	memset(msg, 0x42, sizeof(msg));
	s[0] = (struct ibv_sge){ .addr = (uintptr_t)msg, .length = 64, .lkey = 0 };
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_WRITE, 2, s, 1, (uintptr_t)dst + 64, dmr->rkey,
				  IBV_SEND_INLINE | IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 64);
	assert_true(all_bytes(dst + 64, 64, 0x42));
	s[0].length = 65;
	assert_int_equal(post_one(a.qp, IBV_WR_SEND, 3, s, 1, 0, 0, IBV_SEND_INLINE), EINVAL);
	s[0].length = 8;
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_READ, 4, s, 1, (uintptr_t)dst, dmr->rkey,
				  IBV_SEND_INLINE),
			 EINVAL);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);

	/* max_inline_data 0: a 0-byte inline WRITE_WITH_IMM. */
	svt_max_inline_data = 0;
	assert_int_equal(svt_pair(&a, &b, "svib0"), 0);
	s[0] = (struct ibv_sge){ .addr = 0, .length = 0, .lkey = 0 };
	assert_int_equal(post_recv_sges(b.qp, 41, NULL, 0), 0);
	assert_int_equal(post_one(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 5, s, 1, 0, 0,
				  IBV_SEND_INLINE | IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 5, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0);
	expect_wc_full(b.cq, 41, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 0);
	s[0] = (struct ibv_sge){ .addr = (uintptr_t)msg, .length = 1, .lkey = 0 };
	assert_int_equal(post_one(a.qp, IBV_WR_SEND, 6, s, 1, 0, 0, IBV_SEND_INLINE), EINVAL);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/* Wait (bounded) until the byte at p reads v: an RDMA WRITE has landed.
 * It sleeps between looks: under valgrind's unfair scheduler a spinning
 * thread starves the engine thread that would write the byte. */
static bool landed(const volatile uint8_t *p, uint8_t v)
{
	uint64_t end = svt_now_ms() + WAIT_MS;

	while (*p != v) {
		if (svt_now_ms() > end)
			return false;
		usleep(20);
	}
	return true;
}

static int post_write8(struct svt_end *e, uint64_t wr_id, uint8_t *src, uint32_t lkey, uint8_t *dst,
		       uint32_t rkey, unsigned int flags)
{
	return svt_post_rdma(e->qp, IBV_WR_RDMA_WRITE, wr_id, src, 8, lkey, (uintptr_t)dst, rkey, 0,
			     flags);
}

/*
 * Unsignaled WRs (no IBV_SEND_SIGNALED, sq_sig_all 0) give no completion
 * when they succeed, yet they hold their send queue slot until a
 * completion of a later WR is polled: "All posted Send Requests, Signaled
 * and Unsignaled, are considered outstanding until a Work Completion that
 * they, or Send Requests that were posted after them, was polled" (rdmamojo,
 * "Working with Unsignaled Completions", as NCCL's p2p.cc quotes it; mlx5
 * frees the slots in poll_cq). A queue of unsignaled WRs only fills up for
 * good, and a completion generated but not yet polled frees nothing.
 */
static void test_unsignaled_slots(void **state)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	static uint8_t src[8 * 8], dst[8 * 8];
	struct ibv_mr *smr, *dmr;
	struct pollfd pfd;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	struct ibv_wc wc;

	for (int i = 0; i < 8; i++)
		memset(src + 8 * i, i + 1, 8);
	assert_int_equal(svt_end_init(&a, "svroce0", true, 4), 0);
	assert_int_equal(svt_end_init(&b, "svroce0", false, 4), 0);
	svt_addr_of(&a, 3, &aa);
	svt_addr_of(&b, 3, &ba);
	assert_int_equal(svt_connect(&a, &ba, 3, ACC_ALL, 14, 7, 7), 0);
	assert_int_equal(svt_connect(&b, &aa, 3, ACC_ALL, 14, 7, 7), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);

	/* 3 unsignaled + 1 signaled fill the 4 slots. Once the completion
	 * is there (the channel says so) but not polled, nothing is free. */
	assert_int_equal(ibv_req_notify_cq(a.cq, 0), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(post_write8(&a, (uint64_t)i, src + 8 * i, smr->lkey, dst + 8 * i,
					     dmr->rkey, i == 3 ? IBV_SEND_SIGNALED : 0),
				 0);
	pfd = (struct pollfd){ .fd = a.ch->fd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	assert_int_equal(ibv_get_cq_event(a.ch, &ev_cq, &ev_ctx), 0);
	ibv_ack_cq_events(ev_cq, 1);
	assert_int_equal(post_write8(&a, 4, src, smr->lkey, dst, dmr->rkey, 0), ENOMEM);
	/* Polling it frees all four. */
	assert_int_equal(ibv_poll_cq(a.cq, 1, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 3);
	assert_memory_equal(dst, src, 32);
	for (int i = 4; i < 8; i++)
		assert_int_equal(post_write8(&a, (uint64_t)i, src + 8 * i, smr->lkey, dst + 8 * i,
					     dmr->rkey, i == 7 ? IBV_SEND_SIGNALED : 0),
				 0);
	expect_wc_full(a.cq, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 8);
	assert_memory_equal(dst, src, sizeof(src));
	assert_true(svt_no_wc(a.cq, 20));

	/* Only unsignaled WRs: they all land, but the queue stays full. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(post_write8(&a, 10 + (uint64_t)i, src, smr->lkey, dst + 8 * i,
					     dmr->rkey, 0),
				 0);
	assert_true(landed(dst + 24, 1));
	assert_true(svt_no_wc(a.cq, 20));
	assert_int_equal(post_write8(&a, 14, src, smr->lkey, dst, dmr->rkey, IBV_SEND_SIGNALED),
			 ENOMEM);

	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/* sq_sig_all 1: every send WR completes, flag or no flag; an unsignaled WR
 * that fails, and those flushed behind it, always complete. */
static void test_sq_sig_all_and_errors(void **state)
{
	struct svt_end a, b;
	static uint8_t src[64], dst[64];
	struct ibv_mr *smr, *dmr;

	svt_sq_sig_all = 1;
	assert_int_equal(svt_pair(&a, &b, "svib0"), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	assert_int_equal(post_write8(&a, 1, src, smr->lkey, dst, dmr->rkey, 0), 0);
	expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 8);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);

	svt_sq_sig_all = 0;
	assert_int_equal(svt_pair(&a, &b, "svib0"), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	assert_int_equal(post_write8(&a, 1, src, smr->lkey, dst, dmr->rkey, 0), 0);
	assert_int_equal(post_write8(&a, 2, src, smr->lkey, dst, dmr->rkey + 99, 0), 0);
	assert_int_equal(post_write8(&a, 3, src, smr->lkey, dst, dmr->rkey, 0), 0);
	expect_wc(a.cq, 2, IBV_WC_REM_ACCESS_ERR);
	expect_wc(a.cq, 3, IBV_WC_WR_FLUSH_ERR);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/*
 * An RDMA access of at least one byte: the rkey must name an MR of the
 * responder QP's PD with the remote right, and [remote_addr, +len) must lie
 * inside it, without wrapping (rxe lookup_mr() and mr_check_range()). Else
 * an R_Key violation: IBV_WC_REM_ACCESS_ERR at the requester, the responder
 * QP to ERR with IBV_EVENT_QP_ACCESS_ERR, and not a byte written.
 */
static void check_rkey(enum ibv_wr_opcode op, bool other_pd, uint64_t off, uint32_t len)
{
	struct svt_end a, b;
	static uint8_t src[BUF], dst[BUF];
	struct ibv_mr *smr, *dmr;
	struct ibv_pd *pd2;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	pd2 = ibv_alloc_pd(b.ctx);
	memset(src, 0x11, sizeof(src));
	memset(dst, 0, sizeof(dst));
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(other_pd ? pd2 : b.pd, dst, sizeof(dst), ACC_ALL);
	assert_int_equal(svt_post_rdma(a.qp, op, 1, src, len, smr->lkey, (uintptr_t)dst + off,
				       dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_REM_ACCESS_ERR);
	expect_async(b.ctx, IBV_EVENT_QP_ACCESS_ERR, b.qp);
	assert_int_equal(qp_state(b.qp), IBV_QPS_ERR);
	assert_true(all_bytes(dst, sizeof(dst), 0));
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_dealloc_pd(pd2);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_rkey_checks(void **state)
{
	struct svt_end a, b;
	static uint8_t src[BUF], dst[BUF];
	struct ibv_mr *smr, *dmr, *zmr;

	/* The last byte of the MR is in range; so is a zero-based MR
	 * addressed from 0. */
	assert_int_equal(svt_pair(&a, &b, "svib0"), 0);
	memset(src, 0x22, sizeof(src));
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	zmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL | IBV_ACCESS_ZERO_BASED);
	assert_non_null(zmr);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, 64, smr->lkey,
				       (uintptr_t)dst + BUF - 64, dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 64);
	assert_true(all_bytes(dst + BUF - 64, 64, 0x22));
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_READ, 2, src, 64, smr->lkey, BUF - 64,
				       zmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc_full(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 64);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_dereg_mr(zmr);
	svt_end_fini(&a);
	svt_end_fini(&b);

	/* One byte past the end, before the start, wrapping past 2^64, and
	 * an MR of another PD. */
	check_rkey(IBV_WR_RDMA_WRITE, false, BUF - 63, 64);
	check_rkey(IBV_WR_RDMA_READ, false, (uint64_t)-1, 64);
	check_rkey(IBV_WR_RDMA_WRITE, false, UINT64_MAX - (uintptr_t)dst - 7, 64);
	check_rkey(IBV_WR_RDMA_WRITE_WITH_IMM, true, 0, 64);
	check_rkey(IBV_WR_RDMA_READ, true, 0, 64);
}

/* What ibv_post_send and ibv_post_recv refuse at once (rxe
 * validate_send_wr(), post_one_recv()): more SGEs than the QP was created
 * with, an opcode softverbs lacks, a message above the port's max_msg_sz.
 * EINVAL, with *bad_wr at the WR, and nothing of it queued. */
static void test_post_time_checks(void **state)
{
	struct svt_end a, b;
	static uint8_t buf[64];
	struct ibv_sge s[5];
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	for (int i = 0; i < 5; i++)
		s[i] = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 1, .lkey = 0 };
	/* svt_end_init makes QPs with 4 SGEs each way. */
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = s;
	wr.num_sge = 5;
	assert_int_equal(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	assert_ptr_equal(bad, &wr);
	rwr = (struct ibv_recv_wr){ .sg_list = s, .num_sge = 5 };
	assert_int_equal(ibv_post_recv(b.qp, &rwr, &rbad), EINVAL);
	assert_ptr_equal(rbad, &rwr);
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	bad = NULL;
	assert_int_equal(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	assert_ptr_equal(bad, &wr);
	wr.opcode = IBV_WR_RDMA_WRITE;
	s[0].length = (1u << 30) + 1;
	bad = NULL;
	assert_int_equal(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	assert_ptr_equal(bad, &wr);
	assert_true(svt_no_wc(a.cq, 20));
	assert_true(svt_no_wc(b.cq, 20));
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/* A SEND that does not fit its receive, here one without any SGE: a length
 * error, NAK Invalid Request (rxe RESPST_ERR_LENGTH, rdmavt nack_inv). The
 * responder's receive completes with IBV_WC_LOC_LEN_ERR, its QP to ERR. */
static void test_recv_too_small(void **state)
{
	struct svt_end a, b;
	static uint8_t src[64];
	struct ibv_mr *smr;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), 0);
	assert_int_equal(post_recv_sges(b.qp, 31, NULL, 0), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, src, 8, smr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_REM_INV_REQ_ERR);
	expect_wc(b.cq, 31, IBV_WC_LOC_LEN_ERR);
	expect_async(b.ctx, IBV_EVENT_QP_FATAL, b.qp);
	assert_int_equal(qp_state(b.qp), IBV_QPS_ERR);
	ibv_dereg_mr(smr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_zero_length_rdma_needs_no_rkey, reset_knobs),
		cmocka_unit_test_setup(test_qp_access_flags, reset_knobs),
		cmocka_unit_test_setup(test_rkey_checks, reset_knobs),
		cmocka_unit_test_setup(test_send_needs_no_qp_access, reset_knobs),
		cmocka_unit_test_setup(test_read_needs_responder_resources, reset_knobs),
		cmocka_unit_test_setup(test_zero_length_sges, reset_knobs),
		cmocka_unit_test_setup(test_local_sge_checks, reset_knobs),
		cmocka_unit_test_setup(test_recv_needs_local_write, reset_knobs),
		cmocka_unit_test_setup(test_recv_too_small, reset_knobs),
		cmocka_unit_test_setup(test_inline, reset_knobs),
		cmocka_unit_test_setup(test_post_time_checks, reset_knobs),
		cmocka_unit_test_setup(test_unsignaled_slots, reset_knobs),
		cmocka_unit_test_setup(test_sq_sig_all_and_errors, reset_knobs),
	};

	return cmocka_run_group_tests(tests, svt_fabric_group_setup, svt_fabric_group_teardown);
}
