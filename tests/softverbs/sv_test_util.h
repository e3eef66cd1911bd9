/* SPDX-License-Identifier: MIT */
/* softverbs tests: shared helpers (plain verbs, no softverbs internals). */
#ifndef SV_TEST_UTIL_H
#define SV_TEST_UTIL_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One side of a connection: its device context and objects. */
struct svt_end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch;
	struct ibv_qp *qp;
	bool roce;
};

/* What a peer needs to connect to a QP (exchanged across processes). */
struct svt_addr {
	uint32_t qpn;
	uint16_t lid;
	union ibv_gid gid;
};

/* A private fabric directory per test process (removed by svt_fabric_done). */
void svt_fabric_init(void);
void svt_fabric_done(void);
const char *svt_fabric(void);
/* cmocka group setup and teardown around svt_fabric_init and svt_fabric_done. */
int svt_fabric_group_setup(void **state);
int svt_fabric_group_teardown(void **state);

/* The forked peer of a two-process test; -1 when there is none. */
extern pid_t svt_child;
/*
 * Fork the peer, joined to this process by a socketpair: the child runs
 * fn(its end, arg) and _exits with what fn returns. Sets svt_child. Returns
 * this process's end of the socketpair, or -1 if socketpair or fork failed.
 */
int svt_fork_peer(int (*fn)(int sock, const void *arg), const void *arg);
/* Reap svt_child, killing it if it does not end within ms: its exit status,
 * 128 + the signal that ended it, or -1 if it had to be killed. */
int svt_reap_child(int ms);
/* cmocka teardown: kill and reap svt_child if a test left it behind. */
int svt_child_teardown(void **state);
/* One read() of n bytes from fd once it is readable, waiting at most ms;
 * true if all n came. */
bool svt_read_within(int fd, void *p, size_t n, int ms);

struct ibv_context *svt_open(const char *name);
/* Open name, make a PD, a CQ (with a channel if want_channel) and an RC QP. */
int svt_end_init(struct svt_end *e, const char *name, bool want_channel, int max_wr);
void svt_end_fini(struct svt_end *e);
void svt_addr_of(struct svt_end *e, int gid_index, struct svt_addr *a);
/* RESET -> INIT -> RTR -> RTS towards a; access = QP access flags. */
int svt_connect(struct svt_end *e, const struct svt_addr *a, int gid_index, int access,
		uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry);
/* Connect two local QPs to each other with full remote access. */
int svt_pair(struct svt_end *a, struct svt_end *b, const char *dev);

/* Poll one completion, waiting at most ms; 0 on success, -1 on timeout. */
int svt_wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms);
/* True if no completion arrives within ms. */
bool svt_no_wc(struct ibv_cq *cq, int ms);

int svt_post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *buf, uint32_t len,
		  uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm, unsigned int flags);
int svt_post_recv(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey);

uint64_t svt_now_ms(void);

/* GRH flow label svt_connect puts in the AV (RoCE); 0 by default. */
extern uint32_t svt_flow_label;
/* P_Key index svt_connect gives at INIT; 0 by default. */
extern uint16_t svt_pkey_index;
/* max_dest_rd_atomic svt_connect gives at RTR; 16 by default. */
extern uint8_t svt_max_dest_rd_atomic;
/* max_inline_data of the QPs svt_end_init creates; 64 by default. */
extern uint32_t svt_max_inline_data;
/* sq_sig_all of the QPs svt_end_init creates; 0 by default. */
extern int svt_sq_sig_all;

#endif
