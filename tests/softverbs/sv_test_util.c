// SPDX-License-Identifier: MIT
/* softverbs tests: shared helpers. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "tests/softverbs/sv_test_util.h"

static char fabric_dir[64];
uint32_t svt_flow_label;
uint16_t svt_pkey_index;
uint8_t svt_max_dest_rd_atomic = 16;
uint32_t svt_max_inline_data = 64;
int svt_sq_sig_all;
pid_t svt_child = -1;

void svt_fabric_init(void)
{
	snprintf(fabric_dir, sizeof(fabric_dir), "/tmp/svt.XXXXXX");
	if (!mkdtemp(fabric_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	setenv("SOFTVERBS_FABRIC", fabric_dir, 1);
	setenv("SOFTVERBS_DEVICES", "svroce0:roce:1,svib0:ib:2", 1);
}

void svt_fabric_done(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fabric_dir);
	if (fabric_dir[0] && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", fabric_dir);
}

const char *svt_fabric(void)
{
	return fabric_dir;
}

int svt_fabric_group_setup(void **state)
{
	svt_fabric_init();
	return 0;
}

int svt_fabric_group_teardown(void **state)
{
	svt_fabric_done();
	return 0;
}

int svt_fork_peer(int (*fn)(int sock, const void *arg), const void *arg)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	svt_child = fork();
	if (svt_child < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (svt_child == 0) {
		close(sv[0]);
		_exit(fn(sv[1], arg));
	}
	close(sv[1]);
	return sv[0];
}

int svt_reap_child(int ms)
{
	int st = 0;

	for (int i = 0; i < ms / 10; i++) {
		if (waitpid(svt_child, &st, WNOHANG) == svt_child) {
			svt_child = -1;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		usleep(10000);
	}
	kill(svt_child, SIGKILL);
	waitpid(svt_child, &st, 0);
	svt_child = -1;
	return -1;
}

int svt_child_teardown(void **state)
{
	if (svt_child > 0)
		svt_reap_child(0);
	return 0;
}

bool svt_read_within(int fd, void *p, size_t n, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 1 && read(fd, p, n) == (ssize_t)n;
}

uint64_t svt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct ibv_context *svt_open(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	return ctx;
}

int svt_end_init(struct svt_end *e, const char *name, bool want_channel, int max_wr)
{
	struct ibv_qp_init_attr ia = {
		.cap = { .max_send_wr = (uint32_t)max_wr,
			 .max_recv_wr = (uint32_t)max_wr,
			 .max_send_sge = 4,
			 .max_recv_sge = 4,
			 .max_inline_data = svt_max_inline_data },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = svt_sq_sig_all,
	};
	struct ibv_port_attr pa;

	memset(e, 0, sizeof(*e));
	e->ctx = svt_open(name);
	if (!e->ctx)
		return -1;
	if (ibv_query_port(e->ctx, 1, &pa))
		return -1;
	e->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	e->pd = ibv_alloc_pd(e->ctx);
	if (want_channel)
		e->ch = ibv_create_comp_channel(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 2 * max_wr + 16, e, e->ch, 0);
	if (!e->pd || !e->cq)
		return -1;
	ia.send_cq = ia.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &ia);
	return e->qp ? 0 : -1;
}

void svt_end_fini(struct svt_end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->ch)
		ibv_destroy_comp_channel(e->ch);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	memset(e, 0, sizeof(*e));
}

void svt_addr_of(struct svt_end *e, int gid_index, struct svt_addr *a)
{
	struct ibv_port_attr pa;

	memset(a, 0, sizeof(*a));
	a->qpn = e->qp->qp_num;
	ibv_query_port(e->ctx, 1, &pa);
	a->lid = pa.lid;
	if (gid_index >= 0)
		ibv_query_gid(e->ctx, 1, gid_index, &a->gid);
}

int svt_connect(struct svt_end *e, const struct svt_addr *a, int gid_index, int access,
		uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry)
{
	struct ibv_qp_attr at = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = svt_pkey_index,
		.port_num = 1,
		.qp_access_flags = access,
	};
	int rc;

	rc = ibv_modify_qp(e->qp, &at,
			   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_4096;
	at.dest_qp_num = a->qpn;
	at.rq_psn = 0;
	at.max_dest_rd_atomic = svt_max_dest_rd_atomic;
	at.min_rnr_timer = 1;
	at.ah_attr.port_num = 1;
	at.ah_attr.dlid = a->lid;
	if (gid_index >= 0) {
		at.ah_attr.is_global = 1;
		at.ah_attr.grh.dgid = a->gid;
		at.ah_attr.grh.sgid_index = (uint8_t)gid_index;
		at.ah_attr.grh.hop_limit = 64;
		at.ah_attr.grh.flow_label = svt_flow_label;
	}
	rc = ibv_modify_qp(e->qp, &at,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.timeout = timeout;
	at.retry_cnt = retry_cnt;
	at.rnr_retry = rnr_retry;
	at.sq_psn = 0;
	at.max_rd_atomic = 16;
	return ibv_modify_qp(e->qp, &at,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int svt_pair(struct svt_end *a, struct svt_end *b, const char *dev)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct svt_addr aa, ba;
	int gidx;

	if (svt_end_init(a, dev, false, 64) || svt_end_init(b, dev, false, 64))
		return -1;
	gidx = a->roce ? 3 : -1;
	svt_addr_of(a, gidx, &aa);
	svt_addr_of(b, gidx, &ba);
	if (svt_connect(a, &ba, gidx, acc, 14, 7, 7) || svt_connect(b, &aa, gidx, acc, 14, 7, 7))
		return -1;
	return 0;
}

int svt_wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	uint64_t end = svt_now_ms() + (uint64_t)ms;

	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n == 1)
			return 0;
		if (n < 0)
			return -1;
		usleep(100);
	} while (svt_now_ms() < end);
	return -1;
}

bool svt_no_wc(struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc;

	return svt_wait_wc(cq, &wc, ms) != 0;
}

int svt_post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf, uint32_t len,
		  uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm, unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = len || buf ? 1 : 0, .opcode = op,
		.send_flags = flags, .imm_data = htobe32(imm),
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

int svt_post_recv(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = buf ? 1 : 0 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}
