/* SPDX-License-Identifier: MIT */
/*
 * softverbs: a userspace RDMA device that stands in for libibverbs.so.1.
 *
 * Shared declarations of the library. One process-wide "engine" owns the
 * wire (a listening Unix socket in the fabric directory, an rx thread that
 * reads and applies every incoming message, a tx thread that sends work
 * requests and responses). All verbs objects hang off it.
 *
 * Locking: one engine mutex (sv_eng.lock) protects every verbs object and the
 * connection list. Each CQ has its own mutex for the poll path; lock order is
 * engine lock, then CQ lock. Payload bytes are copied with no lock held: the
 * objects involved are pinned with a reference count (qp->refs) that
 * destroy_qp waits on, boundedly.
 */
#ifndef SV_INTERNAL_H
#define SV_INTERNAL_H

#include <infiniband/verbs.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tests/softverbs/sv_stats.h"

#define SV_EXPORT __attribute__((visibility("default")))

#define SV_MAX_DEVICES 8
#define SV_MAX_PORTS 4
#define SV_MAX_SGE 30
#define SV_MAX_INLINE 512
#define SV_MAX_QP 65536
#define SV_MAX_QP_WR 32768
#define SV_MAX_CQE 4194303
#define SV_MAX_RD_ATOM 16
#define SV_MAX_MSG (1ull << 30) /* port max_msg_sz */
#define SV_ROCE_GIDS 8          /* 4 generated; SOFTVERBS_GID_ROOT tables up to 8 */
#define SV_PKEY_TABLE_LEN 16    /* an IB port's; a RoCE port has 1 entry */
#define SV_ROCE_GID_TBL_LEN 256
#define SV_IB_GID_TBL_LEN 128

_Static_assert(SV_MAX_DEVICES <= SV_STATS_MAX_DEVICES, "a stats slot per device");

#define sv_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct sv_port {
	uint8_t link_layer; /* IBV_LINK_LAYER_* */
	uint16_t lid;       /* IB only */
	enum ibv_port_state state;
	int ngids;
	union ibv_gid gid[SV_ROCE_GIDS];
	uint32_t gid_type[SV_ROCE_GIDS]; /* enum ibv_gid_type */
	uint32_t ipv4;                   /* network order; RoCE only */
	int subnet_len; /* SOFTVERBS_SUBNETS (sv_subnet.c): reaches ipv4/subnet_len; 0: all */
	int ifindex;
	int npkeys; /* P_Key table (sv_pkey.c): entries past npkeys are empty */
	uint16_t pkey[SV_PKEY_TABLE_LEN];
};

struct sv_device {
	struct ibv_device ibdev; /* apps hold &ibdev */
	int index;
	bool roce;
	int nports;
	__be64 node_guid;
	struct sv_port port[SV_MAX_PORTS];
	uint32_t ece_options; /* SOFTVERBS_ECE (sv_ece.c); 0: no ECE */
};

struct sv_context {
	struct verbs_context vctx; /* ibv_context is its last member */
	struct sv_device *dev;
	int async_wfd; /* write end of context.async_fd */
};

struct sv_pd {
	struct ibv_pd ibpd;
};

struct sv_mr {
	struct ibv_mr ibmr;
	uint64_t iova; /* remote address of byte 0 */
	unsigned int access;
	struct sv_mr *hnext; /* key hash chain */
	void *dmabuf_map;    /* a dma-buf MR: its mapping of the fd (munmap at dereg), */
	size_t dmabuf_len;   /* and local SGE addresses are iovas, as on a real device */
	/* Copies through it in flight with sv_eng.lock dropped (a payload read
	 * or written, a READ response queued): ibv_dereg_mr waits them out, as a
	 * real device's dereg fences its DMA, for the caller frees the memory
	 * right after (NCCL's proxy does, in an abort). */
	unsigned int pins;
	bool dying; /* ibv_dereg_mr waits: the last unpin wakes it */
};

/* The MRs one copy goes through (sv_mr_pin), unpinned together once it ends. */
struct sv_mr_pins {
	struct sv_mr *mr[SV_MAX_SGE];
	int n;
};

struct sv_channel {
	struct ibv_comp_channel ch; /* ch.fd: read end of a pipe */
	int wfd;
};

struct sv_qp;

/* A completion in a CQ. A send completion names its QP and the send queue
 * index after its WR: polling it frees the slots up to there (sv_poll_cq). */
struct sv_cqe {
	struct ibv_wc wc;
	struct sv_qp *sq_owner; /* NULL: a receive, or its QP is gone */
	uint64_t sq_next;
};

struct sv_cq {
	struct ibv_cq ibcq;
	pthread_mutex_t lock; /* ring, armed, sq_owner->sq_polled */
	struct sv_cqe *ring;
	uint32_t size, head, count;
	bool armed, solicited_only;
	int nqps; /* QPs using it: destroy gives EBUSY */
};

struct sv_swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	uint32_t imm; /* as posted (network order) */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t num_sge;
	struct ibv_sge *sge; /* points into the QP's sge pool */
	uint8_t *inline_buf; /* copy of inline data, or NULL */
	uint64_t len;
	uint32_t psn;
	uint64_t post_ns;
};

struct sv_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge *sge;
};

struct sv_conn;

struct sv_qp {
	struct ibv_qp ibqp;
	struct sv_context *ctx;
	struct sv_cq *scq, *rcq;
	bool sq_sig_all;
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr; /* as last modified */
	int ordinal;             /* n-th QP of this process, from 1 */
	bool ece_set;            /* ibv_set_ece took ece_options (sv_ece.c) */
	uint32_t ece_options;

	/* Send queue: monotonic counters, slot = counter % sq_size.
	 * [sq_head, sq_send) sent and waiting for a response,
	 * [sq_send, sq_tail) posted and not yet sent.
	 * [sq_polled, sq_head) completed, but no completion of theirs or of a
	 * later WR has been polled yet: their slots are still taken (the
	 * unsignaled-completion rule). Written under the send CQ's lock, read
	 * atomically by ibv_post_send. */
	struct sv_swqe *sq;
	struct ibv_sge *sq_sge;
	uint8_t *sq_inline;
	uint32_t sq_size;
	uint64_t sq_head, sq_send, sq_tail;
	uint64_t sq_polled;
	uint32_t next_psn;
	/* The tx thread is writing WR tx_busy_idx with the lock dropped. Its
	 * completion (the responder may ACK before sendmsg() has returned) is
	 * held in held_status until the write is over: once the application
	 * has the completion it may free or reuse the buffer, so nothing may
	 * still be reading it. Later WRs wait behind it (in order). */
	bool tx_busy;
	uint64_t tx_busy_idx;
	bool held;
	enum ibv_wc_status held_status;
	/* The WR at sq_send has a bad lkey: it fails once every earlier WR has
	 * completed. Until then the tx thread must not pick this QP, or it
	 * would pick it again at once, for ever, holding the lock. */
	bool sq_stalled;
	/* Pacing: the WR at pace_idx (== sq_send while valid) may go on the
	 * wire at pace_ready_ns, the end of the slot it reserved on its
	 * device's and its uplink's links (sv_pace_reserve). */
	bool pace_set;
	uint64_t pace_idx;
	uint64_t pace_ready_ns;

	struct sv_rwqe *rq;
	struct ibv_sge *rq_sge;
	uint32_t rq_size;
	uint64_t rq_head, rq_tail;

	struct sv_conn *out; /* our requests go here */
	/* Path trouble (peer not reachable, not ready, gone): since when, and
	 * when to try again. Cleared by the next response. */
	uint64_t retry_since_ns;
	uint64_t retry_at_ns;
	bool link_cut; /* fault injection: never reconnect */
	uint64_t rnr_until_ns;
	int rnr_left;
	uint32_t resp_psn; /* responder: next expected PSN */

	uint16_t sport;
	int uplink;
	struct sv_stats_qp *stats;
	uint64_t bytes_sent; /* for the link-cut fault */

	int refs; /* threads copying for this QP */
	bool destroyed;
	struct sv_qp *next;
	char qpfile[PATH_MAX];
};

/* Wire message header; payload (if any) follows. Host byte order: every
 * peer is on this host. */
enum sv_op {
	SV_OP_HELLO = 1, /* requester -> responder: bind connection */
	SV_OP_SEND,
	SV_OP_SEND_IMM,
	SV_OP_WRITE,
	SV_OP_WRITE_IMM,
	SV_OP_READ_REQ,
	SV_OP_ACK, /* responder -> requester */
	SV_OP_NAK,
	SV_OP_READ_RESP,
};

enum sv_nak {
	SV_NAK_RNR = 1,
	SV_NAK_ACCESS,  /* -> IBV_WC_REM_ACCESS_ERR */
	SV_NAK_INV_REQ, /* -> IBV_WC_REM_INV_REQ_ERR */
	SV_NAK_OP_ERR,  /* -> IBV_WC_REM_OP_ERR */
	SV_NAK_DEAD,    /* responder QP not ready or in error: dropped */
	SV_NAK_SEQ,     /* PSN ahead of the expected one */
};

#define SV_WIRE_MAGIC 0x53567631u /* "SVv1" */
#define SV_HDR_SOLICITED 1

struct sv_hdr {
	uint32_t magic;
	uint8_t op;
	uint8_t flags;
	uint8_t nak;
	uint8_t rnr_timer;
	uint32_t psn;
	uint32_t imm;
	uint32_t rkey;
	uint32_t src_qpn;
	uint32_t dst_qpn;
	uint16_t lid;
	uint8_t is_global;
	uint8_t link_layer;
	uint64_t raddr;
	uint64_t len;
	uint8_t gid[16];
	uint16_t pkey; /* HELLO: the requester's P_Key */
	uint16_t pad16;
	uint32_t src_ipv4; /* HELLO: the requester's port address (RoCE), network order */
};

struct sv_conn {
	int fd;
	int refs;
	bool outbound;
	bool dead;
	struct sv_qp *qp;    /* bound QP, NULL until HELLO */
	struct sv_hdr hello; /* inbound: the requester's hello */
	bool verified;       /* hello checked against a ready QP */
	bool rnr_wait;       /* after an RNR NAK: drop without NAKs */
	int pending;         /* queued responses not yet written */
	bool resp_seen;      /* scratch of the tx thread's response scan */
	struct sv_conn *next;
};

struct sv_resp {
	struct sv_conn *conn;
	struct sv_hdr hdr;
	void *data;       /* READ response source, or NULL */
	struct sv_mr *mr; /* data's MR, pinned while queued (sv_mr_pin) */
	struct sv_qp *qp; /* for stats and pacing, pinned while queued */
	bool paced;       /* ready_ns is set */
	uint64_t ready_ns;
	struct sv_resp *next;
};

struct sv_config {
	char fabric[128]; /* short: Unix socket paths are under it */
	double time_scale;
	int uplinks;
	uint64_t uplink_rate[SV_STATS_MAX_UPLINKS]; /* bytes/s, 0 = none */
	uint64_t uplink_delay_us[SV_STATS_MAX_UPLINKS];
	/* SOFTVERBS_DEVICE_RATE_MBPS, by device index: bytes/s, 0 = none */
	uint64_t device_rate[SV_MAX_DEVICES];
	/* SOFTVERBS_DEVICE_MAX_MSG_SZ, by device index: every port's max_msg_sz */
	uint64_t max_msg[SV_MAX_DEVICES];
	uint64_t fault_cut_bytes; /* 0 = off */
	int fault_cut_qp;         /* ordinal, 0 = every QP */
	bool fault_cut_deliver; /* the message that crosses the cut arrives whole: its ACK is lost */
	bool fault_cut_keep;    /* a cut link stays cut through a reset of its QP */
	char fault_cut_dev[64];                  /* only QPs on this device ("" = any) */
	long fault_fail_reg;                     /* n-th registration fails */
	long fault_remote_access;                /* n-th incoming RDMA op fails */
	long fault_port_down_ms[SV_MAX_DEVICES]; /* by device index; -1 = off */
	long fault_port_up_ms[SV_MAX_DEVICES];   /* by device index; -1 = off */
	int fault_port_flaps;    /* down/up cycles of a device with both times; 1 = once */
	long post_send_delay_us; /* 0 = off */
	bool dmabuf;             /* ibv_reg_dmabuf_mr: EBADF for a bad fd */
	bool stats_keep;         /* stats file and QP rows outlive their owners */
	bool debug;
};

struct sv_engine {
	pthread_mutex_t lock;
	pthread_cond_t tx_cond;   /* tx work or shutdown */
	pthread_cond_t idle_cond; /* qp->refs, conn->pending or a dying MR's pins dropped */
	int users;                /* open contexts */
	bool stop;
	pthread_t rx_thread, tx_thread;
	int listen_fd;
	int wake[2]; /* wakes the rx thread's poll() */
	char ep_path[108];
	struct sv_conn *conns;
	struct sv_qp *qps;
	struct sv_resp *resp_head, *resp_tail;
	struct sv_mr *mr_hash[1024];
	uint32_t next_key;
	int nqp_created;
	long nreg, nremote_ops;
	uint64_t start_ns;
	/* port faults applied so far, by device: down while port_downs > port_ups */
	int port_downs[SV_MAX_DEVICES], port_ups[SV_MAX_DEVICES];
	struct sv_context *ctxs[64]; /* for async port events */
	int nctx;
	struct sv_stats_file *stats;
	size_t stats_len;
	char stats_path[PATH_MAX];
	struct sv_config cfg;
	/* Pacing: each device and each uplink is a link that is busy until
	 * its *_next_ns (sv_pace_reserve). Written by the tx thread only. */
	uint64_t dev_next_ns[SV_MAX_DEVICES];
	uint64_t ul_next_ns[SV_STATS_MAX_UPLINKS];
};

extern struct sv_engine sv_eng;

/* sv_util.c */
uint64_t sv_now_ns(void);
void sv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sv_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int sv_write_full(int fd, const void *buf, size_t len);
int sv_read_full(int fd, void *buf, size_t len);
int sv_writev_full(int fd, struct iovec *iov, int iovcnt);
int sv_readv_full(int fd, struct iovec *iov, int iovcnt);
int sv_drain(int fd, uint64_t len);
uint64_t sv_hash64(uint64_t x);

/* sv_config.c */
void sv_config_load(struct sv_config *cfg);
uint64_t sv_qp_timeout_ns(const struct ibv_qp_attr *attr);
uint64_t sv_rnr_delay_ns(uint8_t min_rnr_timer);

/* sv_device.c */
struct sv_device *sv_devices(int *n);
/* A port's max_msg_sz on device index d (SOFTVERBS_DEVICE_MAX_MSG_SZ, else SV_MAX_MSG). */
uint64_t sv_max_msg(int d);
int sv_port_check(struct sv_device *dev, uint8_t port);

/* sv_pkey.c */
int sv_pkey_table_len(const struct sv_device *d);
uint16_t sv_pkey_at(const struct sv_port *p, int index);
bool sv_pkey_match(uint16_t a, uint16_t b);
void sv_pkeys_load(struct sv_device *devs, int ndevs);

/* sv_ece.c */
void sv_ece_load(struct sv_device *devs, int ndevs);

/* sv_subnet.c */
uint32_t sv_gid_ipv4(const uint8_t *gid);
bool sv_subnet_reaches(const struct sv_port *p, uint32_t ipv4);
void sv_subnets_load(struct sv_device *devs, int ndevs);
void sv_async_event(struct sv_context *ctx, enum ibv_event_type type, void *elem, int port);
void sv_set_port_state(int dev, enum ibv_port_state state);

/* sv_mr.c */
struct sv_mr *sv_mr_lookup(uint32_t key);
/* Returns the host address for [addr, addr+len) of an MR, or NULL. */
void *sv_mr_translate(struct sv_mr *mr, uint64_t addr, uint64_t len, bool by_iova);
void sv_mr_pin(struct sv_mr_pins *pins, struct sv_mr *mr);
void sv_mr_unpin(struct sv_mr_pins *pins);
void sv_mr_unpin_one(struct sv_mr *mr);

/* sv_cq.c */
void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, bool solicited, struct sv_qp *sq_owner,
		uint64_t sq_next);
void sv_cq_forget_qp(struct sv_cq *cq, struct sv_qp *qp);
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);

/* sv_qp.c */
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct sv_qp *sv_qp_find(uint32_t qpn);
void sv_qp_to_error(struct sv_qp *qp);
bool sv_qp_complete_send(struct sv_qp *qp, enum ibv_wc_status status);
bool sv_qp_pop_recv(struct sv_qp *qp, struct sv_rwqe *out);
void sv_qp_complete_recv(struct sv_qp *qp, const struct sv_rwqe *r, enum ibv_wc_status status,
			 enum ibv_wc_opcode op, uint32_t byte_len, const struct sv_hdr *h);
void sv_qp_put(struct sv_qp *qp);
void sv_qp_addr(struct sv_qp *qp, uint32_t *sip, uint32_t *dip);

/* sv_engine.c */
int sv_engine_get(struct sv_context *ctx);
void sv_engine_put(struct sv_context *ctx);

/* sv_conn.c: connections and helpers shared by the rx and tx threads.
 * Every function here is called with sv_eng.lock held; sv_read_payload and
 * sv_drain_msg drop it while they read. */
void sv_wake_rx(void);
void sv_set_sock_opts(int fd);
struct sv_conn *sv_conn_new(int fd, bool outbound);
void sv_conn_put(struct sv_conn *c);
void sv_conn_kill(struct sv_conn *c);
void sv_conn_lost(struct sv_conn *c);
void sv_path_trouble(struct sv_qp *qp, const char *why);
void sv_queue_resp(struct sv_conn *c, struct sv_hdr *h, void *data, struct sv_mr *mr,
		   struct sv_qp *qp);
void sv_queue_simple(struct sv_conn *c, struct sv_qp *qp, uint8_t op, uint8_t nak, uint32_t psn);
bool sv_read_payload(struct sv_conn *c, struct sv_qp *qp, struct iovec *iov, int n);
bool sv_drain_msg(struct sv_conn *c, const struct sv_hdr *h);
void sv_count_rx(struct sv_qp *qp, uint64_t len);

/* sv_responder.c */
bool sv_qp_ready(const struct sv_qp *qp);
void sv_on_hello(struct sv_conn *c, const struct sv_hdr *h);
void sv_on_request(struct sv_conn *c, const struct sv_hdr *h);

/* sv_rx.c, sv_tx.c: the two wire threads. */
void *sv_rx_main(void *arg);
void *sv_tx_main(void *arg);

/* sv_fabric.c */
int sv_fabric_init(void);
int sv_qpn_alloc(const char *ep_path, uint32_t *qpn, char *file, size_t filelen);
void sv_qpn_free(const char *file);
int sv_qpn_endpoint(uint32_t qpn, char *ep, size_t eplen);
uint16_t sv_rocev2_sport(uint32_t lqpn, uint32_t rqpn, uint32_t flow_label);
int sv_uplink_of(uint32_t sip, uint32_t dip, uint16_t sport, int nuplinks);
uint64_t sv_pace_reserve(int dev, int uplink, uint64_t bytes, uint64_t now);

/* sv_stats.c */
int sv_stats_open(void);
void sv_stats_close(void);
struct sv_stats_qp *sv_stats_qp_slot(uint32_t qpn);
void sv_stats_qp_release(struct sv_stats_qp *slot);
void sv_stats_uplink_add(int uplink, uint64_t bytes);
void sv_stats_device_add(int dev, uint64_t bytes);

#endif
