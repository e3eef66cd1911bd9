/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_ib internals: the verbs RC backend (docs/ib.md).
 *
 * One NCCL device per ACTIVE port of a verbs device (an "HCA"). The HCA's context, PD and
 * registration cache are shared by its ports and guarded by the HCA lock; every comm owns
 * its CQ and QPs (a receive comm its flush QP too), so the data path takes no lock (NCCL
 * drives a comm from one thread at a time).
 *
 * Data protocol (receiver-driven, zero copy, like NCCL's IB transport):
 *   irecv: the receiver RDMA-WRITEs the group's buffers {addr, rkey, size, tag} into slot
 *          seq % IB_RING of the sender's FIFO (registered sender memory).
 *   isend: the sender reads its slot, picks the first unused buffer whose tag matches
 *          (none yet, or the slot not written yet: a NULL request, as ncclIbIsend),
 *          truncates the message to that buffer (as ncclIbIsend) and writes it straight
 *          into it with RDMA_WRITE_WITH_IMM: one write for a small message (QPs taken in
 *          turn), one per QP for a message above the split threshold. The immediate
 *          names the slot, the buffer, the number of chunks and the chunk's own number
 *          (the receiver counts a buffer complete by chunk identity); byte_len of each
 *          completion gives the real size. Nothing is copied.
 *   iflush: a 1-byte RDMA READ over the receive comm's own loopback QP (as NCCL's
 *          gpuFlush QP per receive comm), so no other comm's load can fill it.
 * Set-up, liveness and the goodbye go over plugin/link.c, like net_ofi.
 * A comm over several NICs survives all but one of them failing (ib_failover.c), and takes
 * a failed one back once its port is up again (ib_recover.c).
 */
#ifndef BRAID_IB_H
#define BRAID_IB_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

#include "plugin/backend.h"
#include "plugin/clock.h"
#include "plugin/counters.h"
#include "plugin/judge.h"
#include "plugin/mr_cache.h"
#include "plugin/oob.h"
#include "plugin/pool.h"
#include "plugin/profiler.h"
#include "plugin/link.h"
#include "plugin/stripe.h"

/* libibverbs entry points, resolved with dlsym (never linked). Inline verbs that go through
 * the context's ops table (ibv_post_send, ibv_poll_cq, ...) are used directly. */
struct ibv_dl {
	void *lib;
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_pkey)(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *event);
	void (*ack_async_event)(struct ibv_async_event *event);
	const char *(*wc_status_str)(enum ibv_wc_status status);
	const char *(*event_type_str)(enum ibv_event_type type);
	/* optional (NULL when the library is too old) */
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				       unsigned int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len,
					uint64_t iova, int fd, int access);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
};
extern struct ibv_dl ibv;
int ibv_dl_open(char *why, size_t whylen);

#define IB_RING 32    /* receive groups in flight per comm (NCCL_NET_MAX_REQUESTS) */
#define IB_MAX_QPS 16 /* QPs per connection: up to 8 per NIC, 16 over all its NICs */
#define IB_SQ_DEPTH (BRAID_MAX_RECVS * IB_RING + 8) /* a send uses <= 1 WR per QP */
#define IB_RQ_DEPTH (BRAID_MAX_RECVS * IB_RING + 32)
#define IB_MAX_CHUNK (1ULL << 30)
/* A receive comm's FIFO writes: the one of each receive whose seq is a multiple of this is
 * signaled, as NCCL's IB transport signals one in its ring (p2p.cc ncclIbPostFifo). A
 * ring slot is written again only once a signaled completion at or after its last write
 * was seen (ib_irecv): RC completes in order, so that write was acknowledged and the NIC
 * will not send it again, reading the slot's entries while irecv rewrites them. The send
 * queue then holds at most the IB_RING writes after that completion. */
#define IB_FIFO_SIGNAL_EVERY 8
#define IB_RECV_SQ_DEPTH (IB_RING + 8) /* a receive comm's QPs: FIFO writes only */
_Static_assert(IB_FIFO_SIGNAL_EVERY - 1 + IB_RING <= IB_RECV_SQ_DEPTH,
	       "unsignaled FIFO writes must fit the receive side's send queue");

/* One FIFO entry: a receive buffer, written by the receiver into the sender's memory. seq
 * is written at both ends so that an entry whose write has not all landed is never taken
 * (the source is never rewritten while its write may still be sent: ib_irecv). */
struct ib_fifo_elem {
	uint32_t seq; /* group sequence + 1 (0: never written) */
	uint16_t n;   /* buffers in the group */
	uint16_t idx; /* this buffer */
	uint64_t addr;
	uint64_t size;
	uint32_t rkey[BRAID_VDEV_MAX_NICS]; /* per NIC of the receiver, as NCCL's FIFO */
	int32_t tag;
	uint32_t seq_end; /* == seq */
} __attribute__((aligned(8)));
_Static_assert(sizeof(struct ib_fifo_elem) == 64, "FIFO element layout");

/* imm of a data write: [0..2] buffer, [3..10] seq, [11..15] chunks - 1, [16] the chunk's
 * size is in the receiver's record (adaptive routing), [17..20] the chunk's number (its
 * identity: a chunk replayed after a failover lands twice, and counts once),
 * [24..31] IB_IMM_MAGIC. */
#define IB_IMM_MAGIC 0xb7u
#define IB_IMM_AR (1u << 16)
static inline uint32_t ib_imm(uint32_t seq, int idx, int nchunks)
{
	return (uint32_t)idx | ((seq & 0xffu) << 3) | ((uint32_t)(nchunks - 1) << 11) |
	       (IB_IMM_MAGIC << 24);
}

static inline int ib_imm_chunks(uint32_t imm)
{
	return (int)((imm >> 11) & 31) + 1;
}

static inline uint32_t ib_imm_with_chunk(uint32_t imm, int chunk)
{
	return imm | ((uint32_t)chunk << 17);
}

static inline uint32_t ib_imm_ar(uint32_t imm, int chunk)
{
	return ib_imm_with_chunk(imm | IB_IMM_AR, chunk);
}

static inline int ib_imm_chunk(uint32_t imm)
{
	return (int)((imm >> 17) & 15);
}

/*
 * Adaptive routing (NCCL_IB_ADAPTIVE_ROUTING): the chunk sizes of the messages posted
 * that way, one record per ring slot. The sender writes each chunk's size here and sends
 * it with the chunk's WRITE_WITH_IMM into the receiver's copy, where the receiver reads
 * it once the immediate arrives (the write's byte_len is the record's, not the data's).
 */
struct ib_ar_rec {
	uint32_t len[BRAID_MAX_RECVS][IB_MAX_QPS];
};

struct ib_hca; /* one verbs device */

/* One NCCL device: an active port of an HCA. */
struct ib_dev {
	char name[64];
	int port;
	struct ib_hca *hca;
	int link_layer; /* IBV_LINK_LAYER_* */
	uint16_t lid;
	enum ibv_mtu mtu;
	uint32_t max_msg_sz;
	int gid_index;
	union ibv_gid gid;
	int gid_type;   /* IBV_GID_TYPE_*, -1 unknown */
	int pkey_index; /* BRAID_IB_PKEY / NCCL_IB_PKEY */
	uint16_t pkey;  /* the key at pkey_index; 0 when the library cannot say */
	char gid_why[192];
	int speed_mbps;
	int nqps;        /* QPs per connection for this port */
	int ar;          /* post for adaptive routing (BRAID_IB_ADAPTIVE_ROUTING) */
	int data_direct; /* the port's data-direct device (<name>_dma, NCCL_IB_DATA_DIRECT) */
	/* atomic: when IBV_EVENT_PORT_ERR came (braid_now_ns), 0 once ACTIVE again. Not
	 * fatal, as in NCCL: a QP with traffic fails after its retry budget. */
	uint64_t down_ns;
	int ncomms; /* atomic: comms holding QPs on this port (BRAID_MAX_COMMS) */
	struct braid_ctr_dev *ctr;
	char pci_path[256];
	int numa_node; /* of the HCA, from topo/; -1 unknown */
};

/*
 * A registration. On one HCA it is the HCA's cached entry; a comm over several NICs gets
 * a handle of its own whose parts are the entries of each of its NICs' HCAs (NCCL's
 * ncclIbMrHandle holds one ibv_mr per device the same way).
 */
struct ib_mr {
	uint32_t magic;              /* BRAID_MAGIC_MR */
	struct braid_mr_range range; /* references guarded by the HCA lock */
	int dmabuf;
	struct ib_hca *hca;
	struct ibv_mr *mr;
	int nparts; /* 0: this is an HCA's entry; else one part per rail of the comm */
	struct ib_mr *part[BRAID_VDEV_MAX_NICS];
};

/* The verbs MR of a registration on a comm's rail. */
static inline struct ibv_mr *ib_mr_on(const struct ib_mr *m, int rail)
{
	return m->nparts ? m->part[rail]->mr : m->mr;
}

struct ib_comm;

struct ib_hca {
	char name[64];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	pthread_mutex_t lock; /* registration cache, comm list, async events */
	struct braid_mr_cache cache;
	struct ib_rail *comms; /* the rails of live comms, for async event dispatch */
	int gdr_peermem, gdr_dmabuf;
	char dd_path[256]; /* NCCL_IB_DATA_DIRECT: the data-direct PCI path ("": none) */
};

enum ib_req_kind { IB_REQ_SEND = 1, IB_REQ_RECV = 2, IB_REQ_FLUSH = 3 };

struct ib_req {
	uint32_t magic; /* BRAID_MAGIC_REQ */
	uint8_t kind;
	int n;
	int pending; /* send: chunk completions; recv: buffers + its FIFO write when that is
		      * signaled; flush: 1 per rail */
	ncclResult_t status;
	struct ib_comm *comm;
	uint32_t seq;
	uint64_t first; /* number of its (first) receive buffer, counted over the connection */
	size_t size[BRAID_MAX_RECVS];
	/* send on several rails: chunks not yet complete and bytes, per rail (striping's
	 * goodput measure) */
	uint8_t rail_pending[BRAID_VDEV_MAX_NICS];
	uint32_t rail_bytes[BRAID_VDEV_MAX_NICS];
	/* send: the rails whose part was cut over their QPs by weight (ib_comm.qst) and is
	 * accounted there (a sampled message: braid_stripe_sample), of those the ones whose
	 * chunks only mark (BRAID_STRIPE_MARK), and each QP's chunk then: one at most per QP,
	 * so its completion is the QP's whole part */
	uint8_t qlanes;
	uint8_t qmarks;
	uint32_t qp_bytes[IB_MAX_QPS];
	uint64_t waiting_ns; /* stall counter: when a waiting test() first read the clock (0: not yet) */
	uint8_t stalled;
	uint8_t tick_left; /* waiting test() calls until the next clock read */
	/* send, failover (ib_failover.c): enum ib_fo_state, and its entry in c->fo_send */
	uint8_t fo;
	uint16_t fo_at;
	/* Receives only, and last: a send comm's pool holds IB_SEND_REQ_SIZE bytes per
	 * request (256 of them), not the whole struct. A receive's FIFO entries are not
	 * here but in its ring slot (ib_comm.fifo): a request is reused for another slot. */
	size_t cap[BRAID_MAX_RECVS];
	uint8_t chunks_want[BRAID_MAX_RECVS]; /* 0 until the first chunk says */
	uint16_t chunks_got[BRAID_MAX_RECVS]; /* the chunks landed, a bit each (identity) */
};
#define IB_SEND_REQ_SIZE (offsetof(struct ib_req, cap))

/*
 * What every kind of request reads, set when it leaves the pool. The pool hands an element
 * back as it was put, not zeroed (a memset of a whole receive request, 700 bytes, cost more
 * than the rest of irecv): each kind sets the rest of what it reads.
 */
static inline void ib_req_start(struct ib_req *r, struct ib_comm *c, enum ib_req_kind kind, int n)
{
	r->kind = (uint8_t)kind;
	r->n = n;
	r->pending = 0;
	r->status = ncclSuccess;
	r->comm = c;
	r->waiting_ns = 0;
	r->stalled = 0;
	r->tick_left = BRAID_TICK_CALLS - 1;
	r->fo = 0;
}

/* wr_id: a pointer or index with the kind in the low 2 bits. */
enum { IB_WR_SEND = 0, IB_WR_FIFO = 1, IB_WR_RECV = 2, IB_WR_FLUSH = 3 };

static inline uint64_t ib_wr_id(const void *req, unsigned kind)
{
	return (uint64_t)(uintptr_t)req | kind;
}

struct ib_qp {
	struct ibv_qp *qp;
	uint8_t rail;      /* of our comm */
	uint8_t peer_rail; /* the peer's rail this QP reaches: which of its rkeys to use */
	uint32_t remote_qpn;
	uint32_t flow_label;
	uint16_t sport;      /* RoCEv2 UDP source port the label gives (0: not RoCEv2) */
	uint32_t max_inline; /* bytes a write may carry inline (BRAID_IB_USE_INLINE; 0: none) */
	uint8_t ece_ok;      /* ece holds the QP's ECE (NCCL_IB_ECE_ENABLE, ib_qp_take_ece) */
	struct ibv_ece ece;
	uint32_t rq_reposts; /* receives consumed and not yet posted again */
	struct braid_ctr_qp *ctr;
};

/* Where a QP's peer QP lives (set-up; recovery connects the QP again). */
struct ib_qp_path {
	union ibv_gid gid;
	uint16_t lid;
	uint8_t mtu; /* enum ibv_mtu: the smaller of both ports' */
};

/*
 * One NIC of a comm: its CQ, its flush QP, its place in the HCA's comm list. QP i of a
 * comm lives on rail i % nrails (as NCCL stripes QPs over a merged device's NICs).
 */
struct ib_rail {
	int devidx;
	struct ib_dev *dev;
	struct ib_hca *hca;
	struct ib_comm *comm;
	struct ib_rail *next; /* in hca->comms */
	struct ibv_cq *cq;
	/* receiver: flushes go over a QP connected to itself (NULL: nothing to flush) */
	struct ibv_qp *flush_qp;
	struct ibv_mr *flush_mr;
	uint8_t flush_byte;
	struct braid_ctr_lane *ctr;
};

struct ib_comm {
	uint32_t magic; /* BRAID_MAGIC_SEND / BRAID_MAGIC_RECV while usable */
	int devidx;     /* rail 0's, as are dev and hca: what messages name */
	int is_send;
	struct ib_dev *dev;
	struct ib_hca *hca;
	int nrails;
	struct ib_rail rails[BRAID_VDEV_MAX_NICS];
	struct braid_stripe stripe; /* sender on several rails */
	/* sender: per rail with several QPs, its QPs as lanes (plugin/stripe.c again: each
	 * QP's ECMP path has a goodput of its own); qlanes_on has a bit per such rail, and
	 * qreap counts the completions that fed them since their samples were last folded
	 * (ib_cq.c, every IB_QREAP_EVERY) */
	struct braid_stripe *qst; /* [nrails], NULL when no rail has QP lanes */
	uint8_t qlanes_on;
	uint16_t qreap;
	struct braid_link *link; /* to the peer comm: set-up, liveness, goodbye */
	char peer[64];
	char peer_gid[48];
	int traffic_class;
	int sl;

	int counted; /* rails whose port's ncomms this comm holds a place in */
	int nqps;
	struct ib_qp qps[IB_MAX_QPS];
	uint32_t qpn[IB_MAX_QPS];          /* qps[i].qp->qp_num, side by side: a completion's QP is
				   * found by its number without a pointer chase per QP */
	uint32_t psn[IB_MAX_QPS];          /* our QPs' first PSNs (set-up only) */
	uint8_t want_peer_nic[IB_MAX_QPS]; /* connector, set-up: the listener's NIC per QP */
	uint32_t next_qp;
	size_t split_bytes;
	/* Adaptive routing: sender, post that way (every rail's port does, and the peer gave
	 * its records) the messages above ar_above (INT64_MAX: none; signed, as NCCL compares:
	 * -1 takes every message); receiver, records offered. ar_recs is registered on each
	 * rail. */
	int ar;
	int64_t ar_above;
	struct ib_ar_rec *ar_recs; /* [IB_RING] */
	struct ibv_mr *ar_mr[BRAID_VDEV_MAX_NICS];
	uint64_t rem_ar_addr; /* sender: the receiver's records, with its key per rail */
	uint32_t rem_ar_rkey[BRAID_VDEV_MAX_NICS];

	struct braid_pool reqs;
	int inflight;
	uint32_t seq;
	uint64_t nbufs;     /* receiver: buffers posted so far (the next one's number) */
	uint64_t sent_upto; /* sender: the current group's first buffer number */

	/* sender: the FIFO the receiver writes into, and which buffers of the current group
	 * were already sent to. Receiver: per ring slot, the entries its FIFO write reads
	 * (NCCL's remFifo.elems): a write the NIC sends again (its ACK lost) reads its own
	 * slot's entries, never a later receive's in another slot. fifo_src_mr: the
	 * registration those writes name, fifo_mr or under failover the FIFO QP's rail's. */
	struct ib_fifo_elem (*fifo)[BRAID_MAX_RECVS];
	struct ibv_mr *fifo_mr;
	struct ibv_mr *fifo_src_mr;
	uint32_t used;
	/* receiver: the sender's FIFO, and the request of each ring slot */
	uint64_t rem_fifo_addr;
	uint32_t rem_fifo_rkey;
	struct ib_req *slot[IB_RING];
	/* receiver: QPs whose rq_reposts reached the repost batch (ib_progress reposts them):
	 * the progress of a message walks no QP that has nothing to repost */
	uint16_t rq_due;

	/* Failover (ib_failover.c): on when both sides offered it (BRAID_FAILOVER, several
	 * rails). rail_dead: the rails that failed; the comm fails once all have. */
	uint8_t fo;
	uint8_t rail_dead;
	/* receiver: the QPs themselves in error (or reset by a failed recovery): no receive
	 * is reposted there. A rail fails on its first QP's error; its other QPs may still
	 * carry the sender's writes until the sender's own QP there fails. */
	uint16_t qp_err;
	uint8_t flush_err; /* receiver: rails whose flush QP failed, until recovery restarts it */
	int fo_busy;       /* sender: sends being probed or replayed */
	struct ib_fo_send *fo_send; /* sender: [IB_RING * BRAID_MAX_RECVS] */
	uint32_t *fo_probe;         /* sender: where probes land (after the FIFO) */
	struct ibv_mr *fifo_mrs[BRAID_VDEV_MAX_NICS]; /* the FIFO (either side's) on every rail */
	uint64_t rem_done_addr; /* sender: the receiver's landed-chunk words */
	uint32_t rem_done_rkey[BRAID_VDEV_MAX_NICS];
	uint32_t *fo_done; /* receiver: [IB_RING * BRAID_MAX_RECVS] */
	struct ibv_mr *done_mr[BRAID_VDEV_MAX_NICS];
	uint32_t rem_fifo_rkeys[BRAID_VDEV_MAX_NICS]; /* receiver: the sender's FIFO, per rail */
	int fifo_qp; /* receiver: the QP that carries FIFO writes */
	/* receiver: the FIFO writes of receives before this seq are acknowledged (a signaled
	 * one's completion was seen at or after them) */
	uint32_t fifo_acked;
	uint64_t rail_down_ns[BRAID_VDEV_MAX_NICS];    /* when each rail failed */
	uint64_t rail_down_bytes[BRAID_VDEV_MAX_NICS]; /* sender: the others' bytes then */

	/* Recovery (ib_recover.c): on when both sides offered it (BRAID_RECOVERY, with
	 * failover). Sender: the rail under way (-1: none), its stage, the attempt, and the
	 * rails whose QPs are drained and reset with nothing posted since; both: the QPs
	 * being drained and the drain markers not yet back; receiver: the sender's ask. */
	uint8_t rj;
	int8_t rj_rail;
	uint8_t rj_stage;
	uint8_t rj_clean;
	uint8_t rj_failed; /* sender: a proof READ came back in error */
	uint16_t rj_draining;
	uint16_t rj_waiting;       /* receiver: QPs reconnected, waiting for the sender's DONE */
	uint8_t rj_flush_draining; /* receiver: rails whose flush QP is being drained */
	uint16_t rj_markers;
	uint32_t rj_attempt;
	uint32_t rj_out_ms;
	uint64_t rj_next_ns, rj_deadline_ns, rj_wait_ns;
	uint32_t rj_psn[IB_MAX_QPS];         /* receiver: the sender's new PSNs */
	struct ib_qp_path qpath[IB_MAX_QPS]; /* the peer's port each QP reaches */

	ncclResult_t error; /* sticky */
	/* The first async event to hit the comm, through any of its HCAs (ib_async.c
	 * mark_comm): its claimer alone writes why and qp, then publishes async_error. */
	int async_claim; /* atomic: 1 once an event claimed the report */
	int async_error; /* atomic: set last (an ncclResult_t); read it before the rest */
	char async_why[160];
	int async_qp; /* the QP the event named (0 when it named none) */
	int warned;
	uint64_t next_liveness_ns;
	uint8_t tick_left; /* NULL isends until the next clock read (braid_tick_due) */
	struct braid_ctr_comm *ctr;
	/* profiler events (ib_prof.c): NULL without NCCL's callback, tested once a request
	 * and once a completion */
	struct braid_prof_comm *prof;
};

static inline struct ib_comm *to_ib_comm(void *comm)
{
	return comm;
}

/*
 * A message done: the comm's bytes and messages, and its device's messages. A fused comm's
 * device bytes are counted per NIC as that NIC's part completes (ib_cq.c), so that each
 * NIC's record (braid stat, the summary at close) holds what that NIC carried.
 */
static inline void ib_ctr_msg_done(struct ib_comm *c, size_t bytes_field, size_t msgs_field,
				   uint64_t bytes)
{
	if (c->nrails > 1)
		braid_ctr_add((uint64_t *)((char *)&c->ctr->t + bytes_field), bytes);
	else
		braid_ctr_count(c->ctr, c->dev->ctr, bytes_field, bytes);
	braid_ctr_count(c->ctr, c->dev->ctr, msgs_field, 1);
}

/* A sender's send queue: adaptive routing posts two WRs a chunk (the data, unsignaled, and
 * its WRITE_WITH_IMM), and a QP in error completes both. c->ar is the local choice here,
 * made before the peer answers. */
static inline int ib_sq_depth(const struct ib_comm *c)
{
	return c->ar ? 2 * IB_SQ_DEPTH : IB_SQ_DEPTH;
}

static inline struct ib_req *to_ib_req(void *request)
{
	return request;
}

/* ib_dev.c */
int ib_init(const struct braid_backend_env *env, char *why, size_t whylen);
void ib_fini(void);
int ib_ndevs(void);
ncclResult_t ib_get_props(int devidx, struct braid_dev_props *p);
struct ib_state {
	int ndevs;
	struct ib_dev *devs;
	int nhcas;
	struct ib_hca *hcas;
	int relaxed_ordering; /* registrations carry IBV_ACCESS_RELAXED_ORDERING */
};
extern struct ib_state ib;
void ib_gid_str(const union ibv_gid *gid, char *buf, size_t len);

/* ib_subnet.c: subnet-aware NIC pairing, at connect time only */
struct ib_wire;
/* A port's network as the handle carries it (8 bytes; zeros reach everything). */
void ib_subnet_key(int link_layer, const uint8_t *gid, uint8_t *key);
/* listen: the device's NICs' networks into the handle */
void ib_subnet_fill_handle(const struct braid_vdev *vd, struct braid_handle *h);
/* connect: the NICs of vd that reach one of the listener's (in use, in vd's order), each
 * left out with a WARN; 0, or -ENETUNREACH after a WARN when none does */
int ib_subnet_pick_rails(const struct braid_vdev *vd, const struct braid_link *lk,
			 struct braid_vdev *use);
/* connect: per QP of c (QPs on their rails), the listener's NIC (its handle's order) */
void ib_subnet_pair_qps(const struct ib_comm *c, const struct braid_link *lk, uint8_t *peer_nic);
/* accept: the listener's NICs the HELLO's QPs go to (in use, in order of first QP) and
 * each QP's rail among them; the NICs left out are WARNed when no peer NIC reaches them */
void ib_subnet_listener_rails(const struct braid_vdev *vd, const struct ib_wire *hello,
			      const char *peer, struct braid_vdev *use, uint8_t *rail_of);

/* ib_async.c */
/* Drain the HCA's async events (non-blocking) and mark the comms and ports they hit. */
void ib_async_poll(struct ib_hca *h);
/* The thread that drains them as they come: after the HCAs open, before they close. */
void ib_async_start(void);
void ib_async_stop(void);
void ib_rail_register(struct ib_rail *rl);
void ib_rail_unregister(struct ib_rail *rl);
/* A QP's retry budget, ns: what an RC QP with traffic survives of a dead path
 * (4.096 us x 2^NCCL_IB_TIMEOUT per try, NCCL_IB_RETRY_CNT + 1 tries). */
uint64_t ib_retry_budget_ns(void);

/* ib_qp.c */
int ib_qp_create(struct ib_comm *c, struct ib_qp *q, int rail, int is_send);
/* RESET -> INIT with these access flags; 0 or ibv_modify_qp's errno, not logged. */
int ib_qp_modify_init(struct ibv_qp *qp, const struct ib_dev *d, unsigned int access);
/* RESET -> INIT (create, and recovery after a reset); 0 or -errno (WARNed). */
int ib_qp_to_init(struct ib_comm *c, struct ib_qp *q);
int ib_qp_connect(struct ib_comm *c, struct ib_qp *q, int i, uint32_t rqpn, uint32_t rpsn,
		  uint32_t lpsn, const union ibv_gid *rgid, uint16_t rlid, enum ibv_mtu mtu);
uint32_t ib_flow_label(uint32_t lqpn, uint32_t rqpn, int i);
uint16_t ib_rocev2_sport(uint32_t lqpn, uint32_t rqpn, uint32_t flow_label);
int ib_qp_post_recvs(struct ib_comm *c, struct ib_qp *q, uint32_t count);
int ib_qp_take_ece(struct ib_comm *c, struct ib_qp *q, const struct ibv_ece *peer);
/* One RDMA READ or WRITE of [addr, addr + len) (lkey) against raddr (rkey), with send
 * flags `flags` (IBV_SEND_SIGNALED for a completion); ibv_post_send's return. */
int ib_qp_post_rdma(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, unsigned int flags,
		    const void *addr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey);
const char *ib_mtu_str(enum ibv_mtu mtu);

/* ib_mlx5.c: mlx5 data-direct DMA through libmlx5, opened at run time */
int ib_mlx5_data_direct(struct ib_hca *h, struct ibv_device *dev);
struct ibv_mr *ib_mlx5_reg_dmabuf_dd(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
				     int fd, int access);

/* ib_mr.c */
ncclResult_t ib_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t ib_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			      int fd, void **mhandle);
ncclResult_t ib_dereg_mr(void *comm, void *mhandle);
void ib_mr_cache_purge(struct ib_hca *h);
int ib_access_flags(void);
void ib_relaxed_ordering_init(void);
int ib_dev_comm_limit(const struct ib_dev *d);

/* ib_conn.c */
ncclResult_t ib_listen(const struct braid_vdev *vd, void *handle, void **listen_comm);
ncclResult_t ib_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			void *handle, void **send_comm);
ncclResult_t ib_accept(void *listen_comm, void **recv_comm);
ncclResult_t ib_close_send(void *send_comm);
ncclResult_t ib_close_recv(void *recv_comm);
ncclResult_t ib_close_listen(void *listen_comm);

static inline const char *ib_side(const struct ib_comm *c)
{
	return c->is_send ? "send" : "receive";
}

/* ib_post.c */
ncclResult_t ib_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		      void **request);
ncclResult_t ib_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		      void **mhandles, void **request);

/* The QPs of rail k: k, k + nrails, ... */
static inline int ib_rail_nqps(const struct ib_comm *c, int k)
{
	return (c->nqps - k + c->nrails - 1) / c->nrails;
}

/* How a message goes out (ib_post.c's plan_message, computed once a message): bytes and
 * chunk count per rail, and every chunk's QP and length in message order (rail 0's
 * chunks first). qlanes: the rails whose part was cut over their QPs by weight and is
 * accounted there this message (measured or marking); qmarks: of those, the marking
 * ones. */
struct ib_plan {
	size_t len[BRAID_VDEV_MAX_NICS];
	int nch[BRAID_VDEV_MAX_NICS]; /* 0: the rail carries nothing */
	int total;
	uint8_t qlanes;
	uint8_t qmarks;
	uint8_t qp[IB_MAX_QPS];
	uint32_t clen[IB_MAX_QPS];
};

static inline int ib_plan_qp(const struct ib_comm *c, int k, int j)
{
	uint32_t nq = (uint32_t)ib_rail_nqps(c, k);

	return k + (int)((c->next_qp + (uint32_t)j) % nq) * c->nrails;
}

/* ib_prof.c: profiler events (plugin/profiler.h), out of line; callers test c->prof.
 * isend_ph and irecv_ph (ib_ops.c) arm the record of the request isend or irecv takes next with
 * NCCL's phandles, then call them: a request they did not arm emits nothing. */
void ib_prof_attach(void *comm, ncclProfilerCallback_t cb);
void ib_prof_detach(void *comm);
/* A send's chunks as plan p posts them (before c->next_qp moves on); ar: adaptive routing. */
void ib_prof_send_posting(struct ib_comm *c, struct ib_req *r, const struct ib_plan *p, int ar);
/* A send's chunk on QP qpn completed. */
void ib_prof_send_done(struct ib_comm *c, struct ib_req *r, uint32_t qpn);
/* A chunk of len bytes landed in buffer idx of receive r. */
void ib_prof_recv_chunk(struct ib_comm *c, struct ib_req *r, int idx, const struct ibv_wc *wc,
			uint32_t len);
/* r's events from first on did not go out (first > 0), or r completes or goes back unposted
 * (first 0: what is open stops, and the record is disarmed). */
void ib_prof_end(struct ib_comm *c, struct ib_req *r, int first);

/* ib_cq.c */
ncclResult_t ib_test(void *request, int *done, int *sizes);
/* The comm's first failure is sticky: every later call reports it (inline: ib_cq.c,
 * ib_post.c and ib_failover.c fail comms, and none of them calls into the others for it). */
static inline void ib_comm_fail(struct ib_comm *c, ncclResult_t why)
{
	braid_judge_comm_fail(&c->error, why, c->ctr, c->dev->ctr);
}
/* How WARNs name the comm: "ib: send comm mlx5_0:1" (a braid_judge_who_fn). */
void ib_comm_who(const void *comm, char *buf, size_t len);
/* Read the comm's CQs and handle what completed. */
void ib_progress(struct ib_comm *c);
/* While something waits: the peer, async events, ports (at most every BRAID_LIVENESS_MS). */
void ib_check_health(struct ib_comm *c);
/* The same, with the clock already read. */
void ib_check_health_at(struct ib_comm *c, uint64_t now);
/* The comm's sticky error, with a pending async event turned into one (inline: every isend
 * and irecv asks; ib_comm_async_error takes the event). */
ncclResult_t ib_comm_async_error(struct ib_comm *c);
static inline ncclResult_t ib_comm_error(struct ib_comm *c)
{
	if (c->error || !__atomic_load_n(&c->async_error, __ATOMIC_RELAXED))
		return c->error;
	return ib_comm_async_error(c);
}
/* Closing: read the CQ once, then what c tells its peer in its goodbye. */
void ib_comm_bye(struct ib_comm *c, struct braid_link_bye *bye);

/* ib_failover.c: a fused comm survives a NIC failure (docs/ib.md, failover) */
#define IB_FO_WORDS (IB_RING * BRAID_MAX_RECVS) /* one per buffer of each ring slot */
/* A comm's FIFO allocation: its entries (the receiver's, which it writes from, per ring
 * slot), and on a fused comm the sender's probes' landing words (then one per QP for
 * recovery's proofs, ib_recover.c); the receiver leaves those unused. */
static inline size_t ib_fifo_bytes(const struct ib_comm *c)
{
	return IB_RING * sizeof(*c->fifo) +
	       (c->nrails > 1 ? (IB_FO_WORDS + IB_MAX_QPS) * sizeof(uint32_t) : 0);
}

/* ib_flush.c */
ncclResult_t ib_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
		       void **request);
/* A receive comm's flush QP on a rail, when flushes are due; 0 or -errno (WARNed). */
int ib_flush_open(struct ib_comm *c, struct ib_rail *rl);
void ib_flush_close(struct ib_comm *c);
/* Recovery: the rail's flush QP, drained, from RESET to RTS again; 0 or -errno (WARNed). */
int ib_flush_restart(struct ib_comm *c, struct ib_rail *rl);
/* Send-queue entries the flush QP needs on its rail's CQ. */
#define IB_FLUSH_DEPTH (2 * IB_RING)

#endif
