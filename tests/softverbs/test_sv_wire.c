// SPDX-License-Identifier: MIT
/*
 * softverbs cmocka tests, two processes: bulk RDMA (1 GiB of 32 MiB WRITEs,
 * 32 in flight, then READs) with its speed printed, peer death turning
 * outstanding WRs into IBV_WC_RETRY_EXC_ERR after the scaled QP timeout, and
 * no send completion before the sendmsg() that carried the WR has returned.
 */
#include <dlfcn.h>
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
#include <sys/socket.h>
#include <cmocka.h>

#include "tests/softverbs/sv_test_util.h"

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define MSG (32u << 20)
#define INFLIGHT 32
#define READ_MS 20000 /* the most a peer may take to answer on the socket */

struct xchg {
	struct svt_addr addr;
	uint64_t buf;
	uint32_t rkey;
};

/*
 * sendmsg() is interposed: the test's definition comes before libc's for
 * softverbs too. For a message that carries watch_buf it does what ASan's
 * sendmsg interceptor does, reading the payload again after the real call
 * has returned, and it does so slowly: a completion handed to the
 * application meanwhile (which may then free the buffer) shows as
 * watch_in_send still set. Default visibility: the build hides symbols,
 * and a hidden one would not interpose.
 */
static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
static const char *watch_buf;
static size_t watch_len;
static int watch_in_send;

__attribute__((visibility("default"))) ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	const char *w = __atomic_load_n(&watch_buf, __ATOMIC_ACQUIRE);
	bool watched = false;
	ssize_t n;

	for (size_t i = 0; w && i < m->msg_iovlen; i++) {
		const char *b = m->msg_iov[i].iov_base;

		if (b >= w && b < w + watch_len)
			watched = true;
	}
	if (!watched)
		return real_sendmsg(fd, m, flags);
	__atomic_store_n(&watch_in_send, 1, __ATOMIC_SEQ_CST);
	n = real_sendmsg(fd, m, flags);
	usleep(50000);
	__atomic_store_n(&watch_in_send, 0, __ATOMIC_SEQ_CST);
	return n;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)((i * 131) ^ (i >> 13));
}

/* Child of the bulk test: target of WRITEs and READs. */
static int bulk_target(int sock, const void *arg)
{
	struct svt_end e;
	struct xchg mine = { 0 }, peer;
	uint8_t *buf = malloc(MSG);
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char c;

	if (!buf || svt_end_init(&e, "svroce0", false, 64))
		return 10;
	mr = ibv_reg_mr(e.pd, buf, MSG, ACC_ALL);
	if (!mr)
		return 11;
	svt_addr_of(&e, 3, &mine.addr);
	mine.buf = (uintptr_t)buf;
	mine.rkey = mr->rkey;
	if (write(sock, &mine, sizeof(mine)) != sizeof(mine) ||
	    !svt_read_within(sock, &peer, sizeof(peer), READ_MS))
		return 12;
	if (svt_connect(&e, &peer.addr, 3, ACC_ALL, 14, 7, 7) || svt_post_recv(e.qp, 1, NULL, 0, 0))
		return 13;
	if (write(sock, "r", 1) != 1)
		return 14;
	/* The last WRITE carries an immediate: all data is in place by then. */
	if (svt_wait_wc(e.cq, &wc, 60000) || wc.status != IBV_WC_SUCCESS ||
	    wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || be32toh(wc.imm_data) != 0xfeed)
		return 15;
	for (size_t i = 0; i < MSG; i++)
		if (buf[i] != pattern(i))
			return 16;
	/* Wait for the READs. */
	if (write(sock, "d", 1) != 1 || !svt_read_within(sock, &c, 1, READ_MS))
		return 17;
	ibv_dereg_mr(mr);
	svt_end_fini(&e);
	free(buf);
	return 0;
}

static void test_bulk_two_processes(void **state)
{
	struct svt_end e;
	struct xchg mine = { 0 }, peer;
	uint8_t *src, *back;
	struct ibv_mr *mr, *bmr;
	struct ibv_wc wc;
	int sock;
	uint64_t t0, t1, t2;
	char c;

	sock = svt_fork_peer(bulk_target, NULL);
	assert_true(sock >= 0);
	/* Allocated after fork(), so the child owns nothing it cannot free. */
	src = malloc(MSG);
	back = malloc(MSG);
	assert_non_null(src);
	assert_non_null(back);
	for (size_t i = 0; i < MSG; i++)
		src[i] = pattern(i);
	assert_int_equal(svt_end_init(&e, "svroce0", false, 64), 0);
	mr = ibv_reg_mr(e.pd, src, MSG, IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(e.pd, back, MSG, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	assert_non_null(bmr);
	svt_addr_of(&e, 3, &mine.addr);
	assert_int_equal(write(sock, &mine, sizeof(mine)), sizeof(mine));
	assert_true(svt_read_within(sock, &peer, sizeof(peer), READ_MS));
	assert_int_equal(svt_connect(&e, &peer.addr, 3, ACC_ALL, 14, 7, 7), 0);
	assert_true(svt_read_within(sock, &c, 1, READ_MS));

	/* 1 GiB: 32 WRITEs of 32 MiB, all in flight; the last with imm. */
	t0 = svt_now_ms();
	for (int i = 0; i < INFLIGHT; i++) {
		bool last = i == INFLIGHT - 1;

		assert_int_equal(svt_post_rdma(e.qp,
					       last ? IBV_WR_RDMA_WRITE_WITH_IMM
						    : IBV_WR_RDMA_WRITE,
					       (uint64_t)i, src, MSG, mr->lkey, peer.buf, peer.rkey,
					       0xfeed, IBV_SEND_SIGNALED),
				 0);
	}
	for (int i = 0; i < INFLIGHT; i++) {
		assert_int_equal(svt_wait_wc(e.cq, &wc, 60000), 0);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_int_equal(wc.wr_id, (uint64_t)i);
	}
	t1 = svt_now_ms();
	assert_true(svt_read_within(sock, &c, 1, READ_MS));
	assert_int_equal(c, 'd');

	/* 256 MiB of READs, 8 in flight. */
	for (int i = 0; i < 8; i++)
		assert_int_equal(svt_post_rdma(e.qp, IBV_WR_RDMA_READ, 100 + (uint64_t)i, back, MSG,
					       bmr->lkey, peer.buf, peer.rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(svt_wait_wc(e.cq, &wc, 60000), 0);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_int_equal(wc.opcode, IBV_WC_RDMA_READ);
	}
	t2 = svt_now_ms();
	assert_memory_equal(src, back, MSG);
	printf("softverbs: 1 GiB RDMA WRITE between two processes in %.2f s (%.2f GB/s); "
	       "256 MiB RDMA READ in %.2f s\n",
	       (double)(t1 - t0) / 1000, 1.073741824 / ((double)(t1 - t0 + 1) / 1000),
	       (double)(t2 - t1) / 1000);
	assert_true(t1 - t0 < 30000);
	assert_int_equal(write(sock, "x", 1), 1);
	assert_int_equal(svt_reap_child(20000), 0);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(bmr);
	svt_end_fini(&e);
	close(sock);
	free(src);
	free(back);
}

/* Child that connects, then dies without cleaning up. */
static int doomed_peer(int sock, const void *arg)
{
	struct svt_end e;
	struct xchg mine = { 0 }, peer;
	static char buf[1 << 20];
	struct ibv_mr *mr;
	char c;

	if (svt_end_init(&e, "svroce0", false, 64))
		return 10;
	mr = ibv_reg_mr(e.pd, buf, sizeof(buf), ACC_ALL);
	svt_addr_of(&e, 3, &mine.addr);
	mine.buf = (uintptr_t)buf;
	mine.rkey = mr ? mr->rkey : 0;
	if (write(sock, &mine, sizeof(mine)) != sizeof(mine) ||
	    !svt_read_within(sock, &peer, sizeof(peer), READ_MS))
		return 12;
	if (svt_connect(&e, &peer.addr, 3, ACC_ALL, 14, 7, 7) || write(sock, "r", 1) != 1)
		return 13;
	svt_read_within(sock, &c, 1, READ_MS);
	_exit(0); /* no destroy, no close: the process just goes */
}

static void test_peer_death(void **state)
{
	struct svt_end e;
	struct xchg mine = { 0 }, peer;
	static char src[1 << 20];
	struct ibv_mr *mr;
	struct ibv_wc wc;
	int sock, ok = 0, err = 0;
	uint64_t t0, dt;
	char c;

	sock = svt_fork_peer(doomed_peer, NULL);
	assert_true(sock >= 0);
	assert_int_equal(svt_end_init(&e, "svroce0", false, 64), 0);
	mr = ibv_reg_mr(e.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	svt_addr_of(&e, 3, &mine.addr);
	assert_int_equal(write(sock, &mine, sizeof(mine)), sizeof(mine));
	assert_true(svt_read_within(sock, &peer, sizeof(peer), READ_MS));
	/* timeout 20, retry_cnt 7: 4.3 s * 8 tries, scaled by 0.01 = 344 ms. */
	assert_int_equal(svt_connect(&e, &peer.addr, 3, ACC_ALL, 20, 7, 7), 0);
	assert_true(svt_read_within(sock, &c, 1, READ_MS));

	/* Traffic while the peer dies: some WRITEs may land, then the first
	 * that cannot gets RETRY_EXC_ERR and the rest are flushed. */
	for (int i = 0; i < 16; i++)
		assert_int_equal(svt_post_rdma(e.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, src,
					       sizeof(src), mr->lkey, peer.buf, peer.rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
	assert_int_equal(write(sock, "k", 1), 1);
	assert_int_equal(svt_reap_child(10000), 0);
	t0 = svt_now_ms();
	for (int i = 0; i < 16; i++) {
		assert_int_equal(svt_wait_wc(e.cq, &wc, 10000), 0);
		assert_int_equal(wc.wr_id, (uint64_t)i);
		if (wc.status == IBV_WC_SUCCESS) {
			assert_int_equal(err, 0);
			ok++;
		} else if (wc.status == IBV_WC_RETRY_EXC_ERR) {
			assert_int_equal(err, 0);
			err++;
		} else {
			assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
			assert_int_equal(err, 1);
		}
	}
	if (!err) {
		/* Everything landed before the death: a new WR finds it. */
		t0 = svt_now_ms();
		assert_int_equal(svt_post_rdma(e.qp, IBV_WR_RDMA_WRITE, 99, src, 64, mr->lkey,
					       peer.buf, peer.rkey, 0, IBV_SEND_SIGNALED),
				 0);
		assert_int_equal(svt_wait_wc(e.cq, &wc, 10000), 0);
		assert_int_equal(wc.status, IBV_WC_RETRY_EXC_ERR);
	}
	dt = svt_now_ms() - t0;
	printf("softverbs: %d WRITEs landed; retry exceeded after %llu ms\n", ok,
	       (unsigned long long)dt);
	assert_true(dt < 5000);
	/* After the error the QP is in ERR: new WRs are flushed. */
	assert_int_equal(svt_post_rdma(e.qp, IBV_WR_RDMA_WRITE, 100, src, 64, mr->lkey, peer.buf,
				       peer.rkey, 0, IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_wait_wc(e.cq, &wc, 5000), 0);
	assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	ibv_dereg_mr(mr);
	svt_end_fini(&e);
	close(sock);
}

/* RC: a send completion means the responder has the data and the buffer is
 * the application's again. softverbs used to complete on the peer's ACK
 * even while the tx thread's sendmsg() had not yet returned (ASan then
 * reported a heap-use-after-free in sv_writev_full). */
static void test_completion_after_sendmsg(void **state)
{
	struct svt_end e;
	struct xchg mine = { 0 }, peer;
	static char src[64 << 10];
	struct ibv_mr *mr;
	struct ibv_wc wc;
	int sock;
	char c;

	sock = svt_fork_peer(doomed_peer, NULL);
	assert_true(sock >= 0);
	assert_int_equal(svt_end_init(&e, "svroce0", false, 8), 0);
	mr = ibv_reg_mr(e.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	svt_addr_of(&e, 3, &mine.addr);
	assert_int_equal(write(sock, &mine, sizeof(mine)), sizeof(mine));
	assert_true(svt_read_within(sock, &peer, sizeof(peer), READ_MS));
	assert_int_equal(svt_connect(&e, &peer.addr, 3, ACC_ALL, 14, 7, 7), 0);
	assert_true(svt_read_within(sock, &c, 1, READ_MS));

	watch_len = sizeof(src);
	__atomic_store_n(&watch_buf, src, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(svt_post_rdma(e.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, src,
					       sizeof(src), mr->lkey, peer.buf, peer.rkey, 0,
					       IBV_SEND_SIGNALED),
				 0);
		assert_int_equal(svt_wait_wc(e.cq, &wc, 10000), 0);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		if (__atomic_load_n(&watch_in_send, __ATOMIC_SEQ_CST))
			fail_msg("WR %d completed while sendmsg() still read its buffer", i);
	}
	__atomic_store_n(&watch_buf, NULL, __ATOMIC_RELEASE);
	assert_int_equal(write(sock, "k", 1), 1);
	assert_int_equal(svt_reap_child(10000), 0);
	ibv_dereg_mr(mr);
	svt_end_fini(&e);
	close(sock);
}

static void test_timeout_scaling(void **state)
{
	struct svt_end e;
	struct xchg mine = { 0 }, peer;
	char src[64] = { 0 };
	struct ibv_mr *mr;
	struct ibv_wc wc;
	int sock;
	uint64_t t0, dt;
	char c;

	/* Peer gone before anything is sent: the WR fails after the whole
	 * scaled budget, 4.096 us * 2^20 * 8 * 0.01 = 344 ms. */
	sock = svt_fork_peer(doomed_peer, NULL);
	assert_true(sock >= 0);
	assert_int_equal(svt_end_init(&e, "svroce0", false, 8), 0);
	mr = ibv_reg_mr(e.pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	svt_addr_of(&e, 3, &mine.addr);
	assert_int_equal(write(sock, &mine, sizeof(mine)), sizeof(mine));
	assert_true(svt_read_within(sock, &peer, sizeof(peer), READ_MS));
	assert_int_equal(svt_connect(&e, &peer.addr, 3, ACC_ALL, 20, 7, 7), 0);
	assert_true(svt_read_within(sock, &c, 1, READ_MS));
	assert_int_equal(write(sock, "k", 1), 1);
	assert_int_equal(svt_reap_child(10000), 0);
	t0 = svt_now_ms();
	assert_int_equal(svt_post_rdma(e.qp, IBV_WR_SEND, 1, src, 8, mr->lkey, 0, 0, 0,
				       IBV_SEND_SIGNALED),
			 0);
	assert_int_equal(svt_wait_wc(e.cq, &wc, 10000), 0);
	dt = svt_now_ms() - t0;
	assert_int_equal(wc.status, IBV_WC_RETRY_EXC_ERR);
	assert_true(dt >= 300 && dt < 3000);
	ibv_dereg_mr(mr);
	svt_end_fini(&e);
	close(sock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_bulk_two_processes, svt_child_teardown),
		cmocka_unit_test_teardown(test_peer_death, svt_child_teardown),
		cmocka_unit_test_teardown(test_timeout_scaling, svt_child_teardown),
		cmocka_unit_test_teardown(test_completion_after_sendmsg, svt_child_teardown),
	};

	signal(SIGPIPE, SIG_IGN); /* a dead child shows as a failed read/write */
	real_sendmsg = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	if (!real_sendmsg)
		return 1;
	return cmocka_run_group_tests(tests, svt_fabric_group_setup, svt_fabric_group_teardown);
}
