// SPDX-License-Identifier: MIT
/*
 * softverbs cmocka tests, one process: devices, ports, GIDs, the QP state
 * machine, every data operation between two local QPs, and each error
 * completion the verbs can produce on a live peer.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/softverbs/sv_test_util.h"

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define WAIT_MS 5000

static void expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st,
		      enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	assert_int_equal(svt_wait_wc(cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.wr_id, wr_id);
	if (wc.status != st)
		fail_msg("wr %llu: status '%s', want '%s'", (unsigned long long)wr_id,
			 ibv_wc_status_str(wc.status), ibv_wc_status_str(st));
	if (st == IBV_WC_SUCCESS)
		assert_int_equal(wc.opcode, op);
}

static void test_devices_and_ports(void **state)
{
	struct ibv_device **l;
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge, tbl[16];
	union ibv_gid gid;
	int n;

	l = ibv_get_device_list(&n);
	assert_non_null(l);
	assert_int_equal(n, 2);
	assert_string_equal(ibv_get_device_name(l[0]), "svroce0");
	assert_string_equal(ibv_get_device_name(l[1]), "svib0");
	assert_true(ibv_get_device_guid(l[0]) != 0);
	ibv_free_device_list(l);

	ctx = svt_open("svroce0");
	assert_non_null(ctx);
	assert_int_equal(ibv_query_device(ctx, &da), 0);
	assert_true(da.max_qp >= 1024 && da.max_qp_wr >= 4096 && da.max_sge >= 4);
	assert_true(da.max_mr_size >= (1ull << 36));
	assert_int_equal(da.phys_port_cnt, 1);
	assert_int_equal(ibv_query_port(ctx, 1, &pa), 0);
	assert_int_equal(pa.state, IBV_PORT_ACTIVE);
	assert_int_equal(pa.active_mtu, IBV_MTU_4096);
	assert_int_equal(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	assert_int_equal(pa.lid, 0);
	assert_true(pa.active_width && pa.active_speed);
	assert_int_not_equal(ibv_query_port(ctx, 2, &pa), 0);

	/* The GID table of an mlx5 RoCE port. */
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(ibv_query_gid_ex(ctx, 1, i, &ge, 0), 0);
		assert_int_equal(ge.gid_index, i);
		assert_int_equal(ge.gid_type,
				 (i & 1) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1);
		if (i < 2) {
			assert_int_equal(ge.gid.raw[0], 0xfe);
			assert_int_equal(ge.gid.raw[1], 0x80);
		} else {
			assert_int_equal(ge.gid.raw[10], 0xff);
			assert_int_equal(ge.gid.raw[11], 0xff);
			assert_true(ge.gid.raw[12] != 0);
		}
	}
	assert_int_equal(ibv_query_gid_ex(ctx, 1, 4, &ge, 0), ENODATA);
	assert_int_equal(ibv_query_gid_table(ctx, tbl, 16, 0), 4);
	assert_int_equal(ibv_query_gid(ctx, 1, 3, &gid), 0);
	assert_memory_equal(&gid, &tbl[3].gid, sizeof(gid));
	assert_int_equal(ibv_close_device(ctx), 0);

	ctx = svt_open("svib0");
	assert_non_null(ctx);
	assert_int_equal(ibv_query_device(ctx, &da), 0);
	assert_int_equal(da.phys_port_cnt, 2);
	assert_int_equal(ibv_query_port(ctx, 2, &pa), 0);
	assert_int_equal(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
	assert_true(pa.lid != 0);
	assert_int_equal(ibv_query_gid_ex(ctx, 1, 0, &ge, 0), 0);
	assert_int_equal(ge.gid_type, IBV_GID_TYPE_IB);
	assert_int_equal(ibv_close_device(ctx), 0);
}

static void test_qp_state_machine(void **state)
{
	struct svt_end a, b;
	struct svt_addr ba;
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	char buf[8] = { 0 };

	assert_int_equal(svt_end_init(&a, "svroce0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svroce0", false, 8), 0);
	svt_addr_of(&b, 3, &ba);

	/* RESET -> RTR skips INIT. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), EINVAL);
	/* RESET -> INIT without the port. */
	at.qp_state = IBV_QPS_INIT;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
			 EINVAL);
	/* ... with an attribute INIT does not take. */
	at.port_num = 1;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS |
					       IBV_QP_PORT | IBV_QP_SQ_PSN),
			 EINVAL);
	/* ... with a bad port. */
	at.port_num = 2;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS |
					       IBV_QP_PORT),
			 EINVAL);
	at.port_num = 1;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS |
					       IBV_QP_PORT),
			 0);
	assert_int_equal(ibv_query_qp(a.qp, &at, IBV_QP_STATE, &ia), 0);
	assert_int_equal(at.qp_state, IBV_QPS_INIT);
	assert_int_equal(a.qp->state, IBV_QPS_INIT);
	/* No sends before RTS; receives are fine from INIT. */
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, NULL, 0, 0, 0, 0, 0, 0), EINVAL);

	/* INIT -> RTR: missing AV; RoCE without GRH. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_1024;
	at.dest_qp_num = ba.qpn;
	at.max_dest_rd_atomic = 1;
	at.min_rnr_timer = 12;
	at.ah_attr.port_num = 1;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					       IBV_QP_MIN_RNR_TIMER),
			 EINVAL);
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
			 EINVAL);
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = ba.gid;
	at.ah_attr.grh.sgid_index = 3;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
			 0);
	/* RTR -> RTS missing the retry count; RTR -> INIT is not a transition. */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.rnr_retry = 7;
	at.max_rd_atomic = 1;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RNR_RETRY |
					       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
			 EINVAL);
	at.qp_state = IBV_QPS_INIT;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), EINVAL);
	at.qp_state = IBV_QPS_RTS;
	at.retry_cnt = 7;
	assert_int_equal(ibv_modify_qp(a.qp, &at,
				       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					       IBV_QP_MAX_QP_RD_ATOMIC),
			 0);
	/* RTS -> RTS with an optional attribute; wrong CUR_STATE. */
	at.min_rnr_timer = 5;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), 0);
	at.cur_qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL);
	assert_int_equal(ibv_query_qp(a.qp, &at, IBV_QP_STATE, &ia), 0);
	assert_int_equal(at.qp_state, IBV_QPS_RTS);
	assert_int_equal(at.path_mtu, IBV_MTU_1024);
	assert_int_equal(at.dest_qp_num, ba.qpn);
	assert_int_equal(ia.cap.max_send_wr, 8);

	/* Any state -> ERR -> RESET -> INIT again. */
	at.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), 0);
	at.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), EINVAL);
	at.qp_state = IBV_QPS_RESET;
	assert_int_equal(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), 0);
	assert_int_equal(svt_post_recv(a.qp, 1, buf, sizeof(buf), 0), EINVAL);
	assert_int_equal(svt_connect(&a, &ba, 3, ACC_ALL, 14, 7, 7), 0);

	/* Unsupported QP types and caps. */
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = a.cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = 1;
	assert_null(ibv_create_qp(a.pd, &ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_sge = 1000;
	assert_null(ibv_create_qp(a.pd, &ia));
	assert_int_equal(errno, EINVAL);
	/* A CQ in use cannot go. */
	assert_int_equal(ibv_destroy_cq(a.cq), EBUSY);

	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void run_send_recv(const char *dev)
{
	struct svt_end a, b;
	char src[3][100], dst[256], small[16];
	struct ibv_mr *smr, *dmr;
	struct ibv_sge sge[3];
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge rsge[2];
	struct ibv_wc wc;

	assert_int_equal(svt_pair(&a, &b, dev), 0);
	memset(src, 'a', sizeof(src[0]));
	memset(src[1], 'b', sizeof(src[1]));
	memset(src[2], 'c', sizeof(src[2]));
	memset(dst, 0, sizeof(dst));
	smr = ibv_reg_mr(a.pd, src, sizeof(src), 0);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(smr);
	assert_non_null(dmr);

	/* Receive scattered over two SGEs. */
	rsge[0] = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = 50, .lkey = dmr->lkey };
	rsge[1] = (struct ibv_sge){ .addr = (uintptr_t)dst + 128,
				    .length = 128,
				    .lkey = dmr->lkey };
	rwr = (struct ibv_recv_wr){ .wr_id = 77, .sg_list = rsge, .num_sge = 2 };
	assert_int_equal(ibv_post_recv(b.qp, &rwr, &rbad), 0);

	/* Send gathered from three SGEs, with immediate data. */
	for (int i = 0; i < 3; i++)
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)src[i],
					   .length = 50,
					   .lkey = smr->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 5,
				   .sg_list = sge,
				   .num_sge = 3,
				   .opcode = IBV_WR_SEND_WITH_IMM,
				   .send_flags = IBV_SEND_SIGNALED,
				   .imm_data = htobe32(0xabcd) };
	assert_int_equal(ibv_post_send(a.qp, &wr, &bad), 0);
	expect_wc(a.cq, 5, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 77);
	assert_int_equal(wc.opcode, IBV_WC_RECV);
	assert_int_equal(wc.byte_len, 150);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(be32toh(wc.imm_data), 0xabcd);
	assert_int_equal(wc.qp_num, b.qp->qp_num);
	assert_int_equal(wc.src_qp, a.qp->qp_num);
	for (int i = 0; i < 50; i++)
		assert_int_equal(dst[i], 'a');
	for (int i = 0; i < 100; i++)
		assert_int_equal(dst[128 + i], i < 50 ? 'b' : 'c');

	/* Inline: the buffer needs no MR and is reusable at once. Unsignaled
	 * WRs give no completion; the signaled one after them does. */
	memcpy(small, "inline-data!", 13);
	for (int i = 0; i < 3; i++)
		assert_int_equal(svt_post_recv(b.qp, 100 + (uint64_t)i, dst, sizeof(dst),
					       dmr->lkey),
				 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 10, small, 13, 0, 0, 0, 0,
				       IBV_SEND_INLINE),
			 0);
	memset(small, 0, sizeof(small));
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 11, src, 8, smr->lkey, 0, 0, 0, 0), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 12, src, 8, smr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 12, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_true(svt_no_wc(a.cq, 50));
	expect_wc(b.cq, 100, IBV_WC_SUCCESS, IBV_WC_RECV);
	expect_wc(b.cq, 101, IBV_WC_SUCCESS, IBV_WC_RECV);
	expect_wc(b.cq, 102, IBV_WC_SUCCESS, IBV_WC_RECV);
	assert_memory_equal(dst, "aaaaaaaa", 8);
	/* Inline larger than max_inline_data is refused at post time. */
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 13, src, 100, 0, 0, 0, 0,
				       IBV_SEND_INLINE),
			 EINVAL);

	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_send_recv_roce(void **state)
{
	run_send_recv("svroce0");
}

static void test_send_recv_ib(void **state)
{
	run_send_recv("svib0");
}

static void test_rdma_write_imm_read(void **state)
{
	enum { N = 1 << 20 };
	struct svt_end a, b;
	char *src = malloc(N), *dst = calloc(1, N), *back = calloc(1, N);
	struct ibv_mr *smr, *dmr, *bmr;
	struct ibv_sge sge[2];
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	for (int i = 0; i < N; i++)
		src[i] = (char)(i * 7 + 3);
	smr = ibv_reg_mr(a.pd, src, N, IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(a.pd, back, N, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, N, ACC_ALL);
	assert_non_null(smr);
	assert_non_null(dmr);
	assert_non_null(bmr);

	/* Plain WRITE: no receive consumed, nothing at the responder's CQ. */
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, N / 2, smr->lkey,
				       (uintptr_t)dst, dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(src, dst, N / 2);
	assert_true(svt_no_wc(b.cq, 20));

	/* WRITE_WITH_IMM: consumes a receive, reports imm and byte_len. */
	assert_int_equal(svt_post_recv(b.qp, 42, NULL, 0, 0), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, src + N / 2, N / 2,
				       smr->lkey, (uintptr_t)dst + N / 2, dmr->rkey, 0x1234,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 42);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, N / 2);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(be32toh(wc.imm_data), 0x1234);
	assert_memory_equal(src, dst, N);

	/* READ back into two local SGEs. */
	sge[0] = (struct ibv_sge){ .addr = (uintptr_t)back, .length = 1000, .lkey = bmr->lkey };
	sge[1] = (struct ibv_sge){ .addr = (uintptr_t)back + 1000,
				   .length = N - 1000,
				   .lkey = bmr->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 3,
				   .sg_list = sge,
				   .num_sge = 2,
				   .opcode = IBV_WR_RDMA_READ,
				   .send_flags = IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = dmr->rkey;
	assert_int_equal(ibv_post_send(a.qp, &wr, &bad), 0);
	assert_int_equal(svt_wait_wc(a.cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RDMA_READ);
	assert_int_equal(wc.byte_len, N);
	assert_memory_equal(src, back, N);

	/* Many writes in flight complete in order. */
	for (int i = 0; i < 32; i++)
		assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 100 + (uint64_t)i,
					       src + i * 1024, 1024, smr->lkey,
					       (uintptr_t)dst + (uint64_t)i * 1024, dmr->rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	for (int i = 0; i < 32; i++)
		expect_wc(a.cq, 100 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
	free(src);
	free(dst);
	free(back);
}

/* One remote access violation: requester gets REM_ACCESS_ERR, its QP goes to
 * ERR and a WR posted behind is flushed; the responder gets an async event. */
static void check_access_error(enum ibv_wr_opcode op, int mr_access, int qp_access, uint64_t off,
			       uint32_t len, bool bad_rkey)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	char src[4096] = { 0 }, dst[4096] = { 0 };
	struct ibv_mr *smr, *dmr;
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	struct ibv_async_event ev;
	struct pollfd pfd;

	assert_int_equal(svt_end_init(&a, "svroce0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svroce0", false, 8), 0);
	svt_addr_of(&a, 3, &aa);
	svt_addr_of(&b, 3, &ba);
	assert_int_equal(svt_connect(&a, &ba, 3, ACC_ALL, 14, 7, 7), 0);
	assert_int_equal(svt_connect(&b, &aa, 3, qp_access, 14, 7, 7), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), mr_access);
	assert_non_null(smr);
	assert_non_null(dmr);

	assert_int_equal(svt_post_rdma(a.qp, op, 1, src, len, smr->lkey, (uintptr_t)dst + off,
				       bad_rkey ? dmr->rkey + 1000 : dmr->rkey, 0,
				       IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, src, 8, smr->lkey,
				       (uintptr_t)dst, dmr->rkey, 0, 0),
			 0);
	expect_wc(a.cq, 1, IBV_WC_REM_ACCESS_ERR, 0);
	expect_wc(a.cq, 2, IBV_WC_WR_FLUSH_ERR, 0);
	assert_int_equal(ibv_query_qp(a.qp, &at, IBV_QP_STATE, &ia), 0);
	assert_int_equal(at.qp_state, IBV_QPS_ERR);

	pfd = (struct pollfd){ .fd = b.ctx->async_fd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	assert_int_equal(ibv_get_async_event(b.ctx, &ev), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
	assert_ptr_equal(ev.element.qp, b.qp);
	ibv_ack_async_event(&ev);

	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_remote_access_errors(void **state)
{
	const int lw = IBV_ACCESS_LOCAL_WRITE;

	/* WRITE into an MR without REMOTE_WRITE. */
	check_access_error(IBV_WR_RDMA_WRITE, lw | IBV_ACCESS_REMOTE_READ, ACC_ALL, 0, 64, false);
	/* WRITE out of bounds. */
	check_access_error(IBV_WR_RDMA_WRITE, ACC_ALL, ACC_ALL, 4000, 200, false);
	/* READ from an MR without REMOTE_READ. */
	check_access_error(IBV_WR_RDMA_READ, lw | IBV_ACCESS_REMOTE_WRITE, ACC_ALL, 0, 64, false);
	/* READ out of bounds (before the start). */
	check_access_error(IBV_WR_RDMA_READ, ACC_ALL, ACC_ALL, (uint64_t)-64, 64, false);
	/* Unknown rkey. A QP without remote write access is not an access
	 * error but an invalid request: test_sv_spec. */
	check_access_error(IBV_WR_RDMA_WRITE, ACC_ALL, ACC_ALL, 0, 64, true);
}

static void test_rnr(void **state)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	char buf[64] = { 0 };
	struct ibv_mr *mr;
	uint64_t t0;

	/* rnr_retry 2: the send fails with RNR_RETRY_EXC_ERR. */
	assert_int_equal(svt_end_init(&a, "svib0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svib0", false, 8), 0);
	svt_addr_of(&a, -1, &aa);
	svt_addr_of(&b, -1, &ba);
	assert_int_equal(svt_connect(&a, &ba, -1, ACC_ALL, 14, 7, 2), 0);
	assert_int_equal(svt_connect(&b, &aa, -1, ACC_ALL, 14, 7, 2), 0);
	mr = ibv_reg_mr(a.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 2, buf, 8, mr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_RNR_RETRY_EXC_ERR, 0);
	expect_wc(a.cq, 2, IBV_WC_WR_FLUSH_ERR, 0);
	ibv_dereg_mr(mr);
	svt_end_fini(&a);
	svt_end_fini(&b);

	/* rnr_retry 7 (infinite): the send waits for the receive. The WR
	 * behind it (a WRITE_WITH_IMM) also needs one, and order holds. */
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	mr = ibv_reg_mr(a.pd, buf, sizeof(buf), ACC_ALL);
	struct ibv_mr *bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);

	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, buf, 8, mr->lkey,
				       (uintptr_t)buf, bmr->rkey, 9, IBV_SEND_SIGNALED),
			 0);
	t0 = svt_now_ms();
	assert_true(svt_no_wc(a.cq, 100));
	assert_int_equal(svt_post_recv(b.qp, 50, buf, sizeof(buf), bmr->lkey), 0);
	assert_int_equal(svt_post_recv(b.qp, 51, NULL, 0, 0), 0);
	expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	expect_wc(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_wc(b.cq, 50, IBV_WC_SUCCESS, IBV_WC_RECV);
	expect_wc(b.cq, 51, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_true(svt_now_ms() - t0 >= 100);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

/* A receive with no SGE and a NULL sg_list is legal verbs: WRITE_WITH_IMM
 * consumes it and delivers only the immediate (and byte_len). Under SAN=1
 * a memcpy() from the NULL sg_list aborted here (UBSan). */
static void test_zero_sge_recv(void **state)
{
	struct svt_end a, b;
	char src[64] = { 0 }, dst[64] = { 0 };
	struct ibv_mr *smr, *dmr;
	struct ibv_recv_wr rwr = { .sg_list = NULL, .num_sge = 0 }, *rbad;
	struct ibv_send_wr swr = { .sg_list = NULL, .num_sge = 0 }, *sbad;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	smr = ibv_reg_mr(a.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(b.pd, dst, sizeof(dst), ACC_ALL);
	memset(src, 0x5a, sizeof(src));
	for (uint64_t i = 1; i <= 3; i++) {
		rwr.wr_id = i;
		assert_int_equal(ibv_post_recv(b.qp, &rwr, &rbad), 0);
	}
	/* A payload lands in the MR; the receive only reports it. */
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 10, src, sizeof(src),
				       smr->lkey, (uintptr_t)dst, dmr->rkey, 0x77,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, sizeof(src));
	assert_int_equal(be32toh(wc.imm_data), 0x77);
	assert_memory_equal(src, dst, sizeof(src));
	/* No payload at all, NULL sg_list on both sides. */
	swr.wr_id = 11;
	swr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.imm_data = htobe32(0x78);
	swr.wr.rdma.remote_addr = (uintptr_t)dst;
	swr.wr.rdma.rkey = dmr->rkey;
	assert_int_equal(ibv_post_send(a.qp, &swr, &sbad), 0);
	expect_wc(a.cq, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
	assert_int_equal(wc.wr_id, 2);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_int_equal(wc.byte_len, 0);
	assert_int_equal(be32toh(wc.imm_data), 0x78);
	/* Flushed, both queued and posted in ERR. */
	assert_int_equal(ibv_modify_qp(b.qp, &at, IBV_QP_STATE), 0);
	expect_wc(b.cq, 3, IBV_WC_WR_FLUSH_ERR, 0);
	rwr.wr_id = 4;
	assert_int_equal(ibv_post_recv(b.qp, &rwr, &rbad), 0);
	expect_wc(b.cq, 4, IBV_WC_WR_FLUSH_ERR, 0);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_flush_on_error(void **state)
{
	struct svt_end a, b;
	char buf[64] = { 0 };
	struct ibv_mr *mr;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc;

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	mr = ibv_reg_mr(b.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 5; i++)
		assert_int_equal(svt_post_recv(b.qp, (uint64_t)i, buf, sizeof(buf), mr->lkey), 0);
	assert_int_equal(ibv_modify_qp(b.qp, &at, IBV_QP_STATE), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
		assert_int_equal(wc.wr_id, i);
		assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	}
	/* Posting in ERR flushes at once, sends and receives alike. */
	assert_int_equal(svt_post_recv(b.qp, 9, buf, sizeof(buf), mr->lkey), 0);
	expect_wc(b.cq, 9, IBV_WC_WR_FLUSH_ERR, 0);
	assert_int_equal(svt_post_rdma(b.qp, IBV_WR_SEND, 10, buf, 4, mr->lkey, 0, 0, 0, 0), 0);
	expect_wc(b.cq, 10, IBV_WC_WR_FLUSH_ERR, 0);
	ibv_dereg_mr(mr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_local_errors(void **state)
{
	struct svt_end a, b;
	char buf[64] = { 0 }, big[256] = { 0 }, *rbuf;
	struct ibv_mr *mr, *bmr, *ro;
	struct ibv_async_event ev;

	/* Receive buffer too small: LOC_LEN_ERR at the responder,
	 * REM_INV_REQ_ERR at the requester. */
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	mr = ibv_reg_mr(a.pd, big, sizeof(big), IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(svt_post_recv(b.qp, 7, buf, 16, bmr->lkey), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, big, 200, mr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_REM_INV_REQ_ERR, 0);
	expect_wc(b.cq, 7, IBV_WC_LOC_LEN_ERR, 0);
	assert_int_equal(ibv_get_async_event(b.ctx, &ev), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_QP_FATAL);
	ibv_ack_async_event(&ev);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);

	/* Bad lkey on the send side: LOC_PROT_ERR. READ into a read-only MR:
	 * LOC_PROT_ERR too. */
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	mr = ibv_reg_mr(a.pd, big, sizeof(big), IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, big, 100, mr->lkey + 77, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_LOC_PROT_ERR, 0);
	ibv_dereg_mr(mr);
	svt_end_fini(&a);
	svt_end_fini(&b);

	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	ro = ibv_reg_mr(a.pd, big, sizeof(big), 0);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_READ, 1, big, 64, ro->lkey, (uintptr_t)buf,
				       bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_LOC_PROT_ERR, 0);
	ibv_dereg_mr(ro);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);

	/* A bad lkey behind a WR still waiting for its response: the error
	 * waits for it (in order). The tx thread used to pick that QP again
	 * and again holding the engine lock, so the READ response could never
	 * be sent or applied: a livelock, and no destroy_qp could return. */
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	rbuf = calloc(1, 1 << 20);
	assert_non_null(rbuf);
	mr = ibv_reg_mr(a.pd, rbuf, 1 << 20, IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(b.pd, rbuf, 1 << 20, ACC_ALL);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_READ, 1, rbuf, 1 << 20, mr->lkey,
				       (uintptr_t)rbuf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, rbuf, 64, mr->lkey + 77,
				       (uintptr_t)rbuf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 3, rbuf, 64, mr->lkey,
				       (uintptr_t)rbuf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	expect_wc(a.cq, 2, IBV_WC_LOC_PROT_ERR, 0);
	expect_wc(a.cq, 3, IBV_WC_WR_FLUSH_ERR, 0);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
	free(rbuf);
}

static void test_unreachable_peer(void **state)
{
	struct svt_end a;
	struct svt_addr nobody;
	char buf[64] = { 0 };
	struct ibv_mr *mr;
	uint64_t t0;

	/* A QPN nobody owns: retries run out (timeout 14, retry 3, scaled by
	 * the default 0.01: about 2.7 ms... clamped, so well under a second). */
	assert_int_equal(svt_end_init(&a, "svroce0", false, 8), 0);
	svt_addr_of(&a, 3, &nobody);
	nobody.qpn = (a.qp->qp_num + 12345) & 0xffffff;
	assert_int_equal(svt_connect(&a, &nobody, 3, ACC_ALL, 14, 3, 7), 0);
	mr = ibv_reg_mr(a.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	t0 = svt_now_ms();
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, buf, 8, mr->lkey, 0x1000, 1, 0,
				       0),
			 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, buf, 8, mr->lkey, 0x1000, 1, 0,
				       0),
			 0);
	expect_wc(a.cq, 1, IBV_WC_RETRY_EXC_ERR, 0);
	expect_wc(a.cq, 2, IBV_WC_WR_FLUSH_ERR, 0);
	assert_true(svt_now_ms() - t0 < 2000);
	ibv_dereg_mr(mr);
	svt_end_fini(&a);
}

static void test_wrong_gid_is_unreachable(void **state)
{
	struct svt_end a, b;
	struct svt_addr ba;
	char buf[64] = { 0 };
	struct ibv_mr *mr;

	/* Right QPN, wrong GID: the responder refuses the connection. */
	assert_int_equal(svt_end_init(&a, "svroce0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svroce0", false, 8), 0);
	svt_addr_of(&b, 3, &ba);
	ba.gid.raw[15] ^= 0x55;
	assert_int_equal(svt_connect(&a, &ba, 3, ACC_ALL, 10, 1, 7), 0);
	svt_addr_of(&a, 3, &ba);
	assert_int_equal(svt_connect(&b, &ba, 3, ACC_ALL, 10, 1, 7), 0);
	mr = ibv_reg_mr(a.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, 0, 0), 0);
	expect_wc(a.cq, 1, IBV_WC_RETRY_EXC_ERR, 0);
	ibv_dereg_mr(mr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_peer_not_ready_yet(void **state)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT,
				  .port_num = 1,
				  .qp_access_flags = ACC_ALL };
	char buf[64] = { 0 };
	struct ibv_mr *amr, *bmr;

	/* a sends while b is still in INIT: the responder drops it, the
	 * requester retries, and it goes through once b reaches RTR within
	 * a's retry budget (timeout 20, retry_cnt 7: 344 ms scaled). */
	assert_int_equal(svt_end_init(&a, "svroce0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svroce0", false, 8), 0);
	svt_addr_of(&a, 3, &aa);
	svt_addr_of(&b, 3, &ba);
	assert_int_equal(svt_connect(&a, &ba, 3, ACC_ALL, 20, 7, 7), 0);
	assert_int_equal(ibv_modify_qp(b.qp, &at,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS),
			 0);
	amr = ibv_reg_mr(a.pd, buf, sizeof(buf), ACC_ALL);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), ACC_ALL);
	assert_int_equal(svt_post_recv(b.qp, 5, buf, sizeof(buf), bmr->lkey), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, buf, 8, amr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, buf, 8, amr->lkey,
				       (uintptr_t)buf, bmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_true(svt_no_wc(a.cq, 100));
	assert_int_equal(svt_connect(&b, &aa, 3, ACC_ALL, 20, 7, 7), 0);
	expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
	expect_wc(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_wc(b.cq, 5, IBV_WC_SUCCESS, IBV_WC_RECV);
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_completion_channel(void **state)
{
	struct svt_end a, b;
	struct svt_addr aa, ba;
	char buf[64] = { 0 };
	struct ibv_mr *mr, *bmr;
	struct pollfd pfd;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	struct ibv_wc wc;

	assert_int_equal(svt_end_init(&a, "svib0", false, 8), 0);
	assert_int_equal(svt_end_init(&b, "svib0", true, 8), 0);
	svt_addr_of(&a, -1, &aa);
	svt_addr_of(&b, -1, &ba);
	assert_int_equal(svt_connect(&a, &ba, -1, ACC_ALL, 14, 7, 7), 0);
	assert_int_equal(svt_connect(&b, &aa, -1, ACC_ALL, 14, 7, 7), 0);
	mr = ibv_reg_mr(a.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(b.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(ibv_destroy_comp_channel(b.ch), EBUSY);

	pfd = (struct pollfd){ .fd = b.ch->fd, .events = POLLIN };
	assert_int_equal(ibv_req_notify_cq(b.cq, 0), 0);
	assert_int_equal(poll(&pfd, 1, 50), 0); /* nothing yet */
	assert_int_equal(svt_post_recv(b.qp, 1, buf, sizeof(buf), bmr->lkey), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 1, buf, 8, mr->lkey, 0, 0, 0, 0), 0);
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	assert_int_equal(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), 0);
	assert_ptr_equal(ev_cq, b.cq);
	assert_ptr_equal(ev_ctx, &b);
	ibv_ack_cq_events(ev_cq, 1);
	assert_int_equal(ibv_poll_cq(b.cq, 1, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	/* Not re-armed: a second completion raises no event. */
	assert_int_equal(svt_post_recv(b.qp, 2, buf, sizeof(buf), bmr->lkey), 0);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, 2, buf, 8, mr->lkey, 0, 0, 0, 0), 0);
	assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
	assert_int_equal(poll(&pfd, 1, 20), 0);
	/* Solicited-only: a plain send does not wake, a solicited one does. */
	assert_int_equal(ibv_req_notify_cq(b.cq, 1), 0);
	for (uint64_t id = 3; id <= 4; id++) {
		assert_int_equal(svt_post_recv(b.qp, id, buf, sizeof(buf), bmr->lkey), 0);
		assert_int_equal(svt_post_rdma(a.qp, IBV_WR_SEND, id, buf, 8, mr->lkey, 0, 0, 0,
					       id == 4 ? IBV_SEND_SOLICITED : 0),
				 0);
		assert_int_equal(svt_wait_wc(b.cq, &wc, WAIT_MS), 0);
		assert_int_equal(wc.wr_id, id);
		assert_int_equal(poll(&pfd, 1, id == 4 ? WAIT_MS : 20), id == 4 ? 1 : 0);
	}
	assert_int_equal(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), 0);
	ibv_ack_cq_events(ev_cq, 1);
	/* A CQ with no channel cannot be armed. */
	assert_int_not_equal(ibv_req_notify_cq(a.cq, 0), 0);

	ibv_dereg_mr(mr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
}

static void test_memory_registration(void **state)
{
	struct svt_end a, b;
	char *src = malloc(8192), *dst = calloc(1, 8192);
	struct ibv_mr *smr, *dmr;
	struct ibv_context *ctx;
	struct ibv_pd *pd;

	ctx = svt_open("svroce0");
	pd = ibv_alloc_pd(ctx);
	/* Remote write needs local write. */
	assert_null(ibv_reg_mr(pd, src, 64, IBV_ACCESS_REMOTE_WRITE));
	assert_int_equal(errno, EINVAL);
	/* No dma-buf support unless SOFTVERBS_DMABUF=1 (test_dmabuf_probe): even the fd -1
	 * probe says EOPNOTSUPP. */
	assert_null(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, 3, IBV_ACCESS_LOCAL_WRITE));
	assert_int_equal(errno, EOPNOTSUPP);
	assert_null(ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0));
	assert_int_equal(errno, EOPNOTSUPP);
	/* IBV_ACCESS_RELAXED_ORDERING takes the ibv_reg_mr_iova2 path. */
	smr = ibv_reg_mr(pd, src, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	assert_non_null(smr);
	assert_int_equal(smr->lkey, smr->rkey);
	assert_int_equal(ibv_dereg_mr(smr), 0);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);

	/* An MR with an iova: the peer addresses it from the iova. */
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	memset(src, 0x5a, 8192);
	smr = ibv_reg_mr(a.pd, src, 8192, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr_iova2(b.pd, dst, 8192, 0x100000, ACC_ALL);
	assert_non_null(dmr);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, 4096, smr->lkey,
				       0x100000 + 4096, dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(dst + 4096, src, 4096);
	assert_int_equal(dst[0], 0);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
	free(src);
	free(dst);
}

/*
 * SOFTVERBS_DMABUF=1: the fd -1 probe (NCCL's and braid's dma-buf detection) fails with
 * EBADF, as on an mlx5 with dma-buf support; an fd that is no dma-buf (a pipe) with EINVAL,
 * as the kernel answers. The knob is read when the engine starts (first open device).
 */
static void test_dmabuf_probe(void **state)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int p[2];

	assert_int_equal(pipe(p), 0);
	setenv("SOFTVERBS_DMABUF", "1", 1);
	ctx = svt_open("svroce0");
	assert_non_null(ctx);
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	assert_null(ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0));
	assert_int_equal(errno, EBADF);
	assert_null(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, p[0], IBV_ACCESS_LOCAL_WRITE));
	assert_int_equal(errno, EINVAL);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	unsetenv("SOFTVERBS_DMABUF");
	close(p[0]);
	close(p[1]);
}

/*
 * A dma-buf MR over a memfd (what the CUDA stand-in exports) moves bytes into and out of
 * the fd's own pages: an RDMA WRITE into it lands in another mapping of the fd, an RDMA
 * READ of it returns them, and local SGEs address it by iova. At an offset too.
 */
static void test_dmabuf_moves_bytes(void **state)
{
	const uint64_t iova = 0x7f0000000000ull;
	struct svt_end a, b;
	struct ibv_mr *smr, *dmr;
	char *src = calloc(1, 8192), *pages;
	int fd = memfd_create("sv-dmabuf", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4 * 4096), 0);
	pages = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(pages != MAP_FAILED);
	setenv("SOFTVERBS_DMABUF", "1", 1);
	assert_int_equal(svt_pair(&a, &b, "svroce0"), 0);
	for (int i = 0; i < 8192; i++)
		src[i] = (char)(i * 7 + 3);
	smr = ibv_reg_mr(a.pd, src, 8192, ACC_ALL);
	/* bytes 4096.. of the fd, at iova */
	dmr = ibv_reg_dmabuf_mr(b.pd, 4096, 8192, iova, fd, ACC_ALL);
	assert_non_null(dmr);
	assert_int_equal(svt_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, 8192, smr->lkey, iova,
				       dmr->rkey, 0, IBV_SEND_SIGNALED),
			 0);
	expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(pages + 4096, src, 8192);
	assert_int_equal(pages[0], 0);
	assert_int_equal(pages[3 * 4096], 0);
	/* Local SGEs are iovas: b READs 100 bytes of a's buffer into its dma-buf MR. */
	memset(pages + 4096, 0x33, 8192);
	assert_int_equal(svt_post_rdma(b.qp, IBV_WR_RDMA_READ, 2, (void *)(uintptr_t)(iova + 100),
				       100, dmr->lkey, (uint64_t)(uintptr_t)src, smr->rkey, 0,
				       IBV_SEND_SIGNALED),
			 0);
	expect_wc(b.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_memory_equal(pages + 4096 + 100, src, 100);
	assert_int_equal((unsigned char)pages[4096 + 99], 0x33);
	assert_int_equal((unsigned char)pages[4096 + 200], 0x33);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	svt_end_fini(&a);
	svt_end_fini(&b);
	unsetenv("SOFTVERBS_DMABUF");
	munmap(pages, 4 * 4096);
	close(fd);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_devices_and_ports),
		cmocka_unit_test(test_qp_state_machine),
		cmocka_unit_test(test_send_recv_roce),
		cmocka_unit_test(test_send_recv_ib),
		cmocka_unit_test(test_rdma_write_imm_read),
		cmocka_unit_test(test_remote_access_errors),
		cmocka_unit_test(test_rnr),
		cmocka_unit_test(test_zero_sge_recv),
		cmocka_unit_test(test_flush_on_error),
		cmocka_unit_test(test_local_errors),
		cmocka_unit_test(test_unreachable_peer),
		cmocka_unit_test(test_wrong_gid_is_unreachable),
		cmocka_unit_test(test_peer_not_ready_yet),
		cmocka_unit_test(test_completion_channel),
		cmocka_unit_test(test_memory_registration),
		cmocka_unit_test(test_dmabuf_probe),
		cmocka_unit_test(test_dmabuf_moves_bytes),
	};

	return cmocka_run_group_tests(tests, svt_fabric_group_setup, svt_fabric_group_teardown);
}
