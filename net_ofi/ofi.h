/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_ofi internals: libfabric FI_EP_RDM backend.
 *
 * One physical device per libfabric domain (NIC), and ONE endpoint (with its CQ and AV)
 * per physical device, shared by all comms on it: on EFA every endpoint is a QP and NCCL
 * opens channels x peers comms, and a process in a ping-pong then polls one CQ, not two.
 *
 * A comm holds one LANE per NIC of its NCCL device: a plain device is a comm with one
 * lane, a fused one (BRAID_MERGE, makeVDevice) has one per NIC (docs/multirail.md). A
 * lane is the comm's presence on one physical device: its 16-bit id there (unique on
 * that endpoint, exchanged in the handshake), the peer lane's address, the shared
 * announcement ring of that device, its deferred operations. A message carries the id
 * of the lane it is for in its tag, so the provider's tag matching keeps comms apart.
 *
 * Locking: NCCL drives each comm from one thread at a time, but different comms of one
 * device from different threads at once, and a thread that reads the shared CQ for comm
 * A also completes comm B's operations. The domain is opened FI_THREAD_DOMAIN: braid
 * serialises every libfabric call on a device's objects (endpoint, CQ, AV, MRs) under
 * the device's ep_lock, which also guards what a completion writes: the lane's state and
 * the request's per-lane state (struct ofi_req_lane). A call takes each lane's ep_lock
 * at most once; a request's comm-wide fields are the calling thread's alone. A completion
 * finds its lane through its context (ofi_op -> lane), never through a lookup; a
 * completion error fails its lane's comm only. A comm's link is its own thread's. Set-up,
 * lane ids, the AV table and the registration cache use the device's lock (taken before
 * ep_lock where both are held).
 *
 * Data protocol: receiver-driven, like NCCL's IB transport, over libfabric tag matching:
 * net_ofi/ofi_wire.h describes it with what travels (tags, announcements, blobs).
 *
 * Progress: reading a device's CQ completes any comm's operations; operations the
 * provider refused for now (-FI_EAGAIN) wait on the lane and are posted from every
 * progress of its device, not only its own comm's (a rank spinning in isend on one comm
 * must still send what its receive comm owes another peer). Every call of a comm moves
 * every lane's device. Once one lane of a message is posted, the others never answer
 * "not now": their part waits in the lane's backlog, in order.
 *
 * Closing: a comm says goodbye over its link (plugin/link.h), then cancels what its
 * lanes posted and reaps their CQs until none of its operations is outstanding, for at
 * most OFI_CLOSE_REAP_MS without a completion (OFI_CLOSE_REAP_MAX_MS in all). A lane with operations still outstanding (a send to a dead
 * peer) is parked on its device, and the comm is freed when the last parked lane's
 * endpoint closes, so late completions land in live memory: at backend fini, or when the
 * device's last live lane closes (NCCL before v11 never finalizes, and an endpoint left
 * open at exit can leave things behind, such as shm's /dev/shm region); with
 * FI_MR_ENDPOINT the registrations bound to it keep it open until fini.
 *
 * ofi_lanes.h declares what keeps a fused comm's lanes in step with its NICs (ofi_live.c,
 * ofi_move.c, ofi_stripe.c).
 *
 * Files, each calling only those listed before it: ofi_dl.c, ofi_hmem.c (libfabric
 * itself); ofi_dev.c (provider and devices); ofi_live.c (the NICs a comm uses: at set-up,
 * and for each new group; a NIC gone silent); ofi_watch.c (a thread on the NICs' links);
 * ofi_comm.c (the comm object); ofi_prof.c (profiler events); ofi_post.c (posting a
 * lane's part); ofi_cq.c (completions, progress, cancel); ofi_ep.c (a device's shared
 * endpoint, AV, announcement buffers); ofi_mr.c (registration); ofi_flush.c (iflush: a
 * read of the buffer through the endpoint itself); ofi_stripe.c (a
 * fused comm's weights); ofi_move.c (parts moved off a NIC down); ofi_data.c (isend,
 * irecv, test); ofi_conn.c (listen, connect, accept, close); ofi_ops.c (the ops table,
 * isend/irecv with the profiler's handle, init, fini).
 */
#ifndef BRAID_OFI_H
#define BRAID_OFI_H

#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/backend.h"
#include "plugin/clock.h"
#include "plugin/counters.h"
#include "plugin/mr_cache.h"
#include "plugin/oob.h"
#include "plugin/pool.h"
#include "plugin/profiler.h"
#include "plugin/link.h"
#include "plugin/stripe.h"
#include "net_ofi/ofi_wire.h"

/* libfabric entry points, resolved with dlsym (never linked). */
struct ofi_dl {
	void *lib;
	uint32_t (*version)(void);
	int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
	const char *(*strerror)(int errnum);
};
extern struct ofi_dl ofi_dl;
int ofi_dl_open(char *why, size_t whylen);

#define OFI_MAX_INFLIGHT 32 /* receive requests per comm (NCCL_NET_MAX_REQUESTS) */
_Static_assert(OFI_MAX_INFLIGHT == 32, "a comm's announcement ring has 32 slots");
/* operations a lane may have waiting: every send of its comm in flight (maxRecvs x 32) */
#define OFI_BACKLOG (BRAID_MAX_RECVS * OFI_MAX_INFLIGHT)

/* How long closing a comm waits for its cancelled operations before parking it: 200 ms
 * with nothing completing on the device, and at most OFI_CLOSE_REAP_MAX_MS while things
 * do. A send still outstanding may be one the provider has yet to copy out of the user's
 * buffer, which NCCL frees once close returns (ncclCommAbort): on tcp;ofi_rxm the comms
 * between two processes share one connection, so a send can wait behind other comms'
 * data for a long while under load, then read its buffer. While the device completes
 * anything the connection is moving; with nothing for 200 ms what is left is stuck (a
 * rendezvous send the peer will never match, a dead peer) and is parked. */
#define OFI_CLOSE_REAP_MS 200
#define OFI_CLOSE_REAP_MAX_MS 5000

struct ofi_av_entry { /* shared by the lanes to one peer endpoint */
	struct ofi_av_entry *next;
	fi_addr_t addr;
	uint32_t refs;
	uint32_t len;
	uint8_t name[64];
};
#define OFI_AV_BUCKETS 256

struct ofi_lane;

struct ofi_dev {
	char name[64];
	struct fi_info *info;      /* our copy, for this domain */
	int mr_local, mr_endpoint; /* descriptors for local buffers; MRs bound to an endpoint */
	int mr_virt_addr, mr_prov_key, mr_hmem; /* FI_MR_HMEM: device buffers need an MR */
	uint64_t hmem_caps; /* info->caps when the provider reports FI_HMEM here (ofi_hmem.h), else 0 */
	int flush;        /* iflush reads through the endpoint itself (FI_RMA reads; ofi_flush.c) */
	int flush_unable; /* flushes were due, but the provider offers no FI_RMA reads */
	int numa_node;    /* of the NIC, from topo/; -1 unknown */
	int is_iface;     /* its name was a network interface at init (read: ofi_live.c) */
	char pci_path[256]; /* from topo/; "" unknown */
	struct braid_ctr_dev *ctr;
	pthread_mutex_t lock; /* opening, lane ids, the lane list, the AV table, the MR cache */
	struct fid_fabric *fabric;
	struct fid_domain *domain;

	/* The shared endpoint, opened on first use; its CQ and AV. */
	pthread_mutex_t ep_lock; /* every libfabric call and all data-path state (see top) */
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	char ep_name[64];
	size_t ep_name_len;
	size_t inject_size;
	/* Receives the provider holds for us (buffers and announcement slots), never more
	 * than its queue takes (rx_attr->size; shm answers -FI_ENOMEM past it): past that a
	 * receive waits on the deferred list. 0: no limit known. */
	uint32_t rx_cap;
	uint32_t rx_posted;
	uint64_t id_map[OFI_MAX_COMM_IDS / 64]; /* lane ids in use (parked lanes keep theirs) */
	uint32_t id_next;          /* ids are handed out round robin: a freed one is reused last */
	struct ofi_lane **by_id;   /* ep_lock: live send lanes by id, for announcements */
	struct ofi_lane *lanes;    /* every lane holding an id, parked ones included */
	int nlive;                 /* lanes holding an id, parked ones not included */
	struct ofi_lane *deferred; /* ep_lock: lanes with operations the provider refused */
	uint64_t completions;      /* ep_lock (stored atomically): CQ entries read, for closing and
			       * for telling a silent NIC (ofi_live.c) */
	struct ofi_av_entry *av_tab[OFI_AV_BUCKETS];
	/* announcements land here, whichever lane they are for */
	struct ofi_announce_slot *ann;
	uint32_t nann, ann_nunposted; /* the slots; how many of them wait to be (re)posted */
	uint64_t *ann_unposted;       /* bitmap: slots to (re)post */
	int ann_closing;              /* the endpoint closes: post none again */
	struct fid_mr *ann_mr;
	void *ann_desc;
	/* its interface's state (ofi_live.c), read at most once per BRAID_LIVENESS_MS by
	 * whichever waiting comm asks first (under lock); comms on other threads read it */
	uint64_t link_next_ns; /* written under lock (atomic): when to read it again */
	uint64_t link_read_ns; /* written under lock (atomic): when it was last read */
	uint64_t link_down_ns; /* atomic: when it was first seen down; 0: up */
	uint64_t send_wait_ns; /* atomic: the last WARN of a send waiting (ofi_live_send_waits) */
	uint64_t next_key;     /* requested MR keys when the provider does not pick them */
	struct braid_mr_cache cache;
};

/* One registration of a buffer on one device, shared through the device's cache. */
struct ofi_dev_mr {
	struct braid_mr_range range; /* references guarded by the device lock */
	struct ofi_dev *dev;
	struct fid_mr *mr; /* NULL when the provider needs no registration for this */
	void *desc;
};

/* What NCCL holds: the buffer's registration on the device of each lane, in lane order. */
struct ofi_mr {
	uint32_t magic; /* BRAID_MAGIC_MR */
	/* requests in flight on this memory, one per buffer (ofi_req_hold_mrs): written by
	 * the comm's driving thread only, read by deregMr, which NCCL may call from another
	 * thread (ncclCommDeregister through its proxy service thread) */
	uint32_t users;
	int nlanes;
	struct braid_mr_range range;
	struct ofi_dev_mr *lane[BRAID_VDEV_MAX_NICS];
};

enum ofi_op_type {
	OFI_OP_SEND,
	OFI_OP_RECV,
	OFI_OP_ANNOUNCE_SEND, /* receiver: an announcement sent without inject */
	OFI_OP_ANNOUNCE_RECV, /* a shared announcement buffer */
	OFI_OP_FLUSH,         /* iflush's read of a receive buffer (ofi_flush.c) */
	/* a part moved off a lane whose NIC is down on the sender's side (ofi_move.c); these
	 * stay last: ofi_cq.c tells them by type >= OFI_OP_SEND_MOVED (>= RECV_MOVING) */
	OFI_OP_SEND_MOVED,  /* sender: sent on the lane it moved to */
	OFI_OP_RECV_MOVING, /* receiver: its receive being cancelled on its own lane */
	OFI_OP_RECV_MOVED,  /* cancelled there; then posted on the lane it moved to */
};

/* The libfabric operation context: fi_context2 first, so the CQ's op_context is an ofi_op. */
struct ofi_op {
	struct fi_context2 fictx;
	uint8_t type;
	uint8_t idx;    /* receives: the buffer */
	uint8_t lane;   /* index of the lane in its comm whose state it counts in (r->l[]) */
	uint8_t counts; /* data: the message's first lane, which counts it (tx/rx_msgs) */
	uint8_t from;   /* a part moved to another lane (OFI_OP_*_MOVED): its own lane (soff,
			 * slen, rl[]); `lane` is the one it is posted and counted on */
	struct ofi_req *req;
	struct ofi_lane *l; /* whose operation: completions on the shared CQ go there */
};

static inline struct ofi_op *to_ofi_op(void *op_context)
{
	return braid_container_of((struct fi_context2 *)op_context, struct ofi_op, fictx);
}

struct ofi_announce_slot { /* a shared buffer announcements land in (no req, no l) */
	struct ofi_op op;
	struct ofi_announce msg;
};

static inline struct ofi_announce_slot *to_announce_slot(struct ofi_op *op)
{
	return braid_container_of(op, struct ofi_announce_slot, op);
}

/* A request's state on one lane: written under that lane's ep_lock (completions). */
struct ofi_req_lane {
	int pending;    /* completions still to come */
	uint8_t posted; /* parts posted: a send 0/1, a receive its buffers then its announcement */
	uint8_t done_mask;  /* receives: buffers whose part arrived (or moved to another lane) */
	uint8_t failed;     /* a completion error (ncclResult_t), 0 none */
	uint8_t moved_wait; /* receives: buffers whose part moved onto this lane is still out */
};

/* A receive's part on one lane. */
struct ofi_recv_lane {
	size_t len[BRAID_MAX_RECVS];           /* the part's size, then what arrived */
	size_t off[BRAID_MAX_RECVS];           /* where it starts in the buffer */
	struct ofi_op op[BRAID_MAX_RECVS + 1]; /* + the announcement */
	struct ofi_announce ann;
	uint64_t flush_sink; /* a flush request's read lands here (registered: the pool) */
};

/* A receive's buffers, after its struct ofi_req. */
struct ofi_recv_part {
	size_t size[BRAID_MAX_RECVS]; /* capacity */
	char *buf[BRAID_MAX_RECVS];
	struct ofi_mr *mr[BRAID_MAX_RECVS];
	struct ofi_recv_lane rl[]; /* one per lane */
};

/* A request of a comm's pool: a send, a receive, or a flush (BRAID_MAGIC_FLUSH, a receive
 * comm's: buffer 0 is the one read back, op[0] of each lane its read; ofi_flush.c). */
struct ofi_req {
	uint32_t magic; /* BRAID_MAGIC_REQ, BRAID_MAGIC_FLUSH */
	uint8_t is_send;
	uint8_t stalled;
	uint8_t tick_left; /* waiting test() calls until the next clock read */
	uint8_t noted;     /* sends: lanes whose part's completion the stripe has */
	uint8_t skip;      /* sends: lanes the receiver posted no receive on (OFI_PART_POSTED) */
	uint8_t lanes;     /* the lanes it has parts on: its group's (OFI_KIND_LANES); a flush 0 */
	uint8_t moved;     /* lanes whose part went on another lane (ofi_move.c) */
	int n;
	ncclResult_t status; /* judged by the calling thread (the peer's goodbye) */
	struct ofi_comm *comm;
	uint64_t first;      /* number of the (first) buffer it fills */
	uint64_t waiting_ns; /* stall counter: when a waiting test() first read the clock (0: not yet) */
	uint64_t split_ns; /* receives: when test() first found some lanes' parts in, not all */
	struct ofi_req_lane l[BRAID_VDEV_MAX_NICS];
	/* sends: the message and each lane's piece of it */
	char *sbuf;
	size_t ssize;
	struct ofi_mr *smr;
	size_t soff[BRAID_VDEV_MAX_NICS], slen[BRAID_VDEV_MAX_NICS];
	/* then a send's operation on each lane, or a receive's struct ofi_recv_part: pools
	 * hold only what their comm's kind and lanes need (memory per comm, issue 13) */
	_Alignas(16) unsigned char tail[];
};
#define OFI_SEND_REQ_SIZE(nlanes) (sizeof(struct ofi_req) + (nlanes) * sizeof(struct ofi_op))
#define OFI_RECV_REQ_SIZE(nlanes)                                \
	(sizeof(struct ofi_req) + sizeof(struct ofi_recv_part) + \
	 (nlanes) * sizeof(struct ofi_recv_lane))

static inline struct ofi_op *ofi_req_sop(struct ofi_req *r, int k)
{
	return (struct ofi_op *)(void *)r->tail + k;
}

static inline struct ofi_recv_part *ofi_req_recv(struct ofi_req *r)
{
	return (struct ofi_recv_part *)(void *)r->tail;
}

/* Sender: a lane's announcement of one receive group, while its sends go out. */
struct ofi_group {
	int arrived;   /* atomic: set (release) by the CQ reader once ann is whole */
	uint32_t used; /* bitmask of buffers already sent to */
	uint32_t via;  /* a group moved (ofi_move.c): the lane this lane's parts went to, + 1;
			* set with the move, and read for that group only */
	struct ofi_announce ann;
};

/* A comm's presence on one physical device. Fields marked ep_lock are written under the
 * lane's device's ep_lock; the rest by set-up or by the thread driving the comm. */
struct ofi_lane {
	struct ofi_comm *comm;
	struct ofi_dev *dev;
	int devidx;
	uint8_t k;        /* its index in the comm */
	uint16_t id;      /* ours: in the tags of what this lane receives */
	uint16_t peer_id; /* the peer lane's: in the tags of what we send */
	uint32_t token;   /* ours; announcements for us carry it */
	uint32_t peer_token;
	fi_addr_t peer_addr;
	struct ofi_av_entry *av;    /* the peer's AV entry, referenced */
	struct braid_ctr_comm *ctr; /* ep_lock: the comm's counters (parked: a dummy) */
	int outstanding;            /* ep_lock: posted operations not completed yet */
	int closing;                /* ep_lock: the comm closes: errors are expected */
	int mr_dropped;             /* ep_lock: ofi_lane_drop_mr cancelled some: expected */
	int drop_stuck;             /* ep_lock: some outlived its reap: it waits no more */
	int tell_trunc;             /* atomic: ETRUNC seen; the comm's thread tells the peer */
	/* ep_lock: profiler events (ofi_prof.c; NULL: none), at a post's or completion's hand */
	struct braid_prof_comm *prof;
	int parked;                   /* closed with operations outstanding */
	ncclResult_t error;           /* ep_lock: sticky, from completions and posting */
	struct ofi_lane *next, *prev; /* the device's lane list */
	struct fid_mr *pool_mr;       /* receive requests hold announcements and flush sinks */
	void *pool_desc;
	struct ofi_av_entry *self_av; /* receiver, where flushes are due: our own endpoint */
	/* operations the provider did not take (-FI_EAGAIN): posted from any progress of
	 * the device, in order, so nothing ever waits inside a call (ep_lock) */
	struct ofi_req *backlog[OFI_BACKLOG];
	uint32_t backlog_head, backlog_tail;
	struct ofi_lane *deferred_next; /* on dev->deferred while the backlog is not empty */
	int on_deferred;
	/* sender: announcements arrived, by group (ep_lock, `arrived` atomic), and the
	 * group this lane sends to (every buffer of the ones before was sent to) */
	struct ofi_group ring[OFI_MAX_INFLIGHT];
	uint32_t seq;
	uint32_t nmoved;      /* ep_lock; sender: groups moved off this lane so far (ofi_move.c) */
	uint32_t weights_seq; /* ep_lock; receiver's lane 0: the newest weight message taken */
	/* ep_lock; receiver: since when the announcement of unreach_req finds no path, when
	 * to try again (ofi_post.c, announce_unreachable); 0: they find one */
	uint64_t unreach_ns, unreach_retry_ns;
	const struct ofi_req *unreach_req;
};

struct ofi_comm {
	uint32_t magic; /* BRAID_MAGIC_SEND / BRAID_MAGIC_RECV while usable */
	int is_send;
	int nlanes;
	struct braid_link *link; /* to the peer comm: set-up, liveness, goodbye */
	char peer[64];           /* the peer's handshake address, for messages */
	struct braid_pool reqs;
	int inflight, recv_max;     /* receives in flight; their bound: the ring, fused one less */
	uint32_t seq;               /* receiver: next group; sender: group being sent to */
	uint64_t nbufs;             /* receiver: buffers posted so far (the next one's number) */
	uint64_t sent_upto;         /* sender: every buffer below was sent to */
	struct braid_stripe stripe; /* receiver: the cut (follow mode); sender: lane rates and
				     * the weights it sends (docs/multirail.md, net_ofi) */
	/* fused comms: the sender's weights. Sender: the last wire form sent, the number
	 * of the next message. Receiver: the newest arrived (atomic: the CQ reader writes
	 * it, under lane 0's ep_lock) and the one the cut follows. */
	uint64_t weights_sent;
	uint32_t weights_seq;
	int weights_on; /* sender: adaptive and the message fits the inject size */
	uint64_t weights_in;
	uint64_t weights_cut;
	ncclResult_t error; /* sticky: once the comm failed, every call says so */
	struct braid_ctr_comm *ctr;
	int nparked; /* atomic: lanes parked; the last endpoint to close frees the comm */
	/* profiler events (ofi_prof.c): NULL without NCCL's callback; each lane has a copy.
	 * Set before the first post, cleared under every lane's ep_lock. */
	struct braid_prof_comm *prof;
	uint64_t live_next_ns; /* when a waiting call next looks at the NICs (ofi_live.c) */
	uint8_t tick_left;     /* NULL isends until the next clock read (braid_tick_due) */
	uint64_t ann_split_ns; /* sender: when isend first found the group it waits for
				* announced on some lanes, not all (0: not); ann_split_seq: that group */
	uint32_t ann_split_seq;
	uint64_t ann_split_comp; /* the late lane's device's completions when the split began */
	int send_wait_warned;    /* sender: a send waited past the bound (ofi_live_send_waits) */
	uint8_t dev_nics;        /* NICs of the device; the comm's lanes are those in used */
	uint32_t used;
	/* Fused comms: lanes in and out of new groups (ofi_live.c). The receiver leaves a lane
	 * out of the groups it posts while its NIC, or the sender's on that lane, is down;
	 * the sender sends to the lanes each group names (OFI_KIND_LANES). */
	uint64_t lanes_next_ns; /* when irecv or isend next looks at the NICs */
	uint32_t lanes_out;     /* receiver: lanes left out of new groups */
	uint32_t lanes_in;      /* receiver: the other lanes, and */
	uint32_t ann_kind;      /* the kind of their announcements (OFI_KIND_LANES) */
	uint32_t peer_down;     /* receiver: lanes whose NIC the sender says is down */
	uint32_t told_down;     /* sender: its lanes whose NIC is down, as last told */
	uint32_t ctr_down;      /* lanes braid stat counts failed (failovers > recoveries) */
	uint32_t gmask;         /* sender: the lanes of group seq, once matched */
	int gref;               /* sender: the first of them */
	/* Parts moved off a NIC down (ofi_move.c). Sender: group move_seq's lanes asked to
	 * move, moved, refused. Receiver: own_moves (atomic), lanes whose announcement found
	 * its NIC down (ofi_post.c). move_warned: lanes whose moves WARNed (the rest INFO) */
	int move_on;
	uint32_t move_seq, move_asked, move_done, move_refused, own_moves, move_warned;
	uint64_t move_ask_ns;   /* sender: last ask; receiver: polls the link at each tick until */
	struct ofi_lane lane[]; /* nlanes */
};

/*
 * What every request reads, set when it leaves the pool. The pool hands an element back as
 * it was put, not zeroed (a memset of a whole receive request, about 1 KiB, was most of
 * irecv's own cost): isend and irecv set the rest of what they read (cut_send, cut_recv).
 */
static inline void ofi_req_start(struct ofi_req *r, struct ofi_comm *c, int is_send, int n)
{
	r->is_send = (uint8_t)is_send;
	r->stalled = 0;
	r->tick_left = BRAID_TICK_CALLS - 1;
	r->noted = 0;
	r->skip = 0;
	r->moved = 0;
	r->n = n;
	r->status = ncclSuccess;
	r->comm = c;
	r->waiting_ns = 0;
	r->split_ns = 0;
	for (int k = 0; k < c->nlanes; k++)
		r->l[k] = (struct ofi_req_lane){ 0 };
}

/* One writer per registration (NCCL registers per comm; the comm's driving thread), so
 * no atomic read-modify-write on the data path: a plain add, stored atomically for
 * deregMr's read, relaxed (deregMr acts on it only where NCCL has stopped the comm's
 * thread: ncclCommAbort). NULL: a registration deregMr let go of. */
static inline void ofi_mr_users_add(struct ofi_mr *m, int d)
{
	if (m)
		__atomic_store_n(&m->users, m->users + (uint32_t)d, __ATOMIC_RELAXED);
}

/*
 * r's buffers are in flight (d 1: r->magic becomes BRAID_MAGIC_REQ) or no longer (d -1:
 * test() frees it, or its comm closes): their registrations' users, one per buffer. A
 * request in the pool holds them exactly while its magic is BRAID_MAGIC_REQ.
 */
static inline void ofi_req_hold_mrs(struct ofi_req *r, int d)
{
	if (r->is_send) {
		ofi_mr_users_add(r->smr, d);
		return;
	}
	struct ofi_mr **mr = ofi_req_recv(r)->mr;

	for (int i = 0, n = r->n; i < n; i++)
		ofi_mr_users_add(mr[i], d);
}

/* r has nothing on lane k (its group leaves the lane out): complete there from the start. */
static inline void ofi_req_leave_out(struct ofi_req *r, int k)
{
	r->l[k].posted = (uint8_t)(r->is_send ? 1 : r->n + 1);
	r->l[k].done_mask = 0xff;
}

/* The comm's lanes, as a mask. */
static inline uint32_t ofi_all_lanes(const struct ofi_comm *c)
{
	return (1u << c->nlanes) - 1;
}

/* NCCL's opaque handles, typed. */
static inline struct ofi_comm *to_ofi_comm(void *comm)
{
	return comm;
}

static inline struct ofi_req *to_ofi_req(void *request)
{
	return request;
}

static inline struct ofi_mr *to_ofi_mr(void *mhandle)
{
	return mhandle;
}

static inline const char *ofi_comm_kind(const struct ofi_comm *c)
{
	return c->is_send ? "send" : "receive";
}

/* A lane fails from a completion or a post: the comm sees it at its next call. ep_lock. */
static inline void ofi_lane_fail(struct ofi_lane *l, ncclResult_t why)
{
	if (l->error == ncclSuccess)
		l->error = why;
}

/* ofi_dev.c */
struct ofi_state {
	int ndevs;
	struct ofi_dev *devs;
	char provider[64];
	int slow; /* the provider is one braid only uses when named (tcp, shm, ...) */
	uint32_t api_version;
};
extern struct ofi_state ofi;
const char *ofi_strerror(int err);
/* Find the provider and its devices; 0, or -1 with why (ofi_devs_free undoes it). */
int ofi_devs_init(const struct braid_backend_env *env, char *why, size_t whylen);
/* Free the devices; their endpoints, domains and fabrics are closed. */
void ofi_devs_free(void);
ncclResult_t ofi_get_props(int devidx, struct braid_dev_props *p);
/* Whether d reads type's receive buffers back on iflush (BRAID_OFI_FLUSH, where the
 * provider offers the reads: d->flush): they then register with FI_REMOTE_READ. */
int ofi_flush_due(const struct ofi_dev *d, int type);

/* ofi_comm.c */
struct ofi_comm *ofi_comm_alloc(const struct braid_vdev *vd, int is_send, struct braid_link *lk);
/* The comm's memory, its request pool and the pool's registrations; nothing of it may be
 * posted any more. Takes each lane's ep_lock (not held). */
void ofi_comm_release(struct ofi_comm *c);

/* ofi_ep.c */
/* Fabric, domain and the shared endpoint with its announcement buffers, unless open;
 * 0 or -errno (WARNed). d->lock held. */
int ofi_dev_open_ep(struct ofi_dev *d);

/* Close the shared endpoint, its CQ and AV, and free the comms whose last parked lane was
 * there. d->lock held, no live lane on the device (or fini). */
void ofi_dev_close_ep(struct ofi_dev *d);
/* A reference to the peer endpoint's AV entry in l->av, l->peer_addr; d->lock held. */
int ofi_av_get(struct ofi_lane *l, const uint8_t *name, uint32_t len);
/* A reference to the AV entry of endpoint name on d (inserted if new) in *out; d->lock
 * held; whose: for a WARN. */
int ofi_av_ref(struct ofi_dev *d, const uint8_t *name, uint32_t len, const char *whose,
	       struct ofi_av_entry **out);
void ofi_av_put(struct ofi_dev *d, struct ofi_av_entry *e);
/* Register (and with FI_MR_ENDPOINT bind to the shared endpoint) one buffer of ours.
 * Takes ep_lock. */
int ofi_mr_reg_raw(struct ofi_dev *d, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
		   void **desc);
void ofi_mr_close_raw(struct ofi_dev *d, struct fid_mr *mr);
/* The key of a new registration: ours, unless the provider picks keys (FI_MR_PROV_KEY). */
uint64_t ofi_mr_next_key(struct ofi_dev *d);
/* ep_lock held. 0, or the error with mr closed. */
int ofi_mr_bind_or_close(struct ofi_dev *d, int rc, struct fid_mr **mr);

/* ofi_post.c: everything ep_lock held (the lane's device) */
/* A send's part on lane l: 0, -FI_EAGAIN or the provider's error. */
int ofi_post_send(struct ofi_lane *l, struct ofi_req *r);
/* A receive's parts not posted yet on lane l, its announcement last; stops at -FI_EAGAIN. */
int ofi_post_recv(struct ofi_lane *l, struct ofi_req *r);
/* r's part on lane l, a send or a receive. */
int ofi_post_part(struct ofi_lane *l, struct ofi_req *r);
/* A flush request's read on lane l (ofi_flush.c): 0, -FI_EAGAIN or the provider's error. */
int ofi_post_flush(struct ofi_lane *l, struct ofi_req *r);
/* A part moved to lane l (ofi_move.c): r's lane-`from` part sent, or buffer i's received,
 * on l under its moved tag, counted on l: 0, -FI_EAGAIN or the provider's error. */
int ofi_post_moved_send(struct ofi_lane *l, struct ofi_req *r, int from);
int ofi_post_moved_recv(struct ofi_lane *l, struct ofi_req *r, int from, int i);
/* The sender's weights (plugin/stripe.h wire form) to the peer's lane, injected:
 * 0, -FI_EAGAIN or the provider's error. */
int ofi_post_weights(struct ofi_lane *l, uint64_t wire, uint32_t seq);
/* r behind l's backlog; the device's progress posts it */
void ofi_lane_defer(struct ofi_lane *l, struct ofi_req *r);
static inline int ofi_lane_backlogged(const struct ofi_lane *l)
{
	return l->backlog_head != l->backlog_tail;
}
/* Post l's backlog in order; -FI_EAGAIN while some is left, else 0. */
int ofi_post_backlog(struct ofi_lane *l);
/* Post the shared announcement buffers not posted yet; 0 or a fatal -errno. */
int ofi_post_announce_bufs(struct ofi_dev *d);

/* ofi_cq.c: everything ep_lock held */
/* Read the shared CQ and post deferred operations; 0 or a -errno from fi_cq_read other
 * than -FI_EAGAIN. */
int ofi_dev_progress(struct ofi_dev *d);
/* Closing: l's backlog is posted no more (its requests may hold buffers NCCL has
 * deregistered already, as ncclCommAbort does). */
void ofi_lane_undefer(struct ofi_lane *l);
/* Take r out of l's backlog: what waits there is never posted now. ofi_req_unpost: out of
 * every lane's (ep_lock not held); 1 if a lane has some of r with the provider, else 0. */
void ofi_lane_backlog_drop(struct ofi_lane *l, const struct ofi_req *r);
int ofi_req_unpost(struct ofi_comm *c, struct ofi_req *r);
/* Closing: fi_cancel everything l has posted, off the deferred list. */
void ofi_lane_cancel(struct ofi_lane *l);
/* ncclCommAbort deregisters memory under operations still posted (ofi_dereg_mr): l's
 * operations on m's memory leave its backlog, are cancelled and reaped (bounded, as a
 * close), and fail their requests. Under ep_lock; the operations still outstanding. */
int ofi_lane_drop_mr(struct ofi_lane *l, const struct ofi_mr *m);
/* Closing: progress d until left(d, arg) is 0, within the bounds of OFI_CLOSE_REAP_MS;
 * with yield, ep_lock is dropped between reads so that other comms keep moving. Returns
 * what left() says at the end; *rc the first fi_cq_read error (which ends it), or 0. */
int ofi_dev_reap(struct ofi_dev *d, int (*left)(const struct ofi_dev *d, const void *arg),
		 const void *arg, int yield, int *rc);
/* A left() for ofi_dev_reap: the operations outstanding on every lane d lists. */
int ofi_dev_lanes_left(const struct ofi_dev *d, const void *arg);

/* ofi_mr.c */
ncclResult_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t ofi_dereg_mr(void *comm, void *mhandle);
void ofi_mr_cache_purge(struct ofi_dev *d);

/* ofi_flush.c */
ncclResult_t ofi_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request);
/* test() of a flush request (the core's test_flush). */
ncclResult_t ofi_flush_test(void *request, int *done, int *sizes);

/* ofi_data.c */
ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request);
ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request);
ncclResult_t ofi_test(void *request, int *done, int *sizes);
/* Closing: what c tells its peer in its goodbye (progresses every lane). */
void ofi_comm_bye(struct ofi_comm *c, struct braid_link_bye *bye);

/* ofi_prof.c: profiler events (plugin/profiler.h), out of line; callers test the lane's or
 * the comm's prof. A request isend_ph or irecv_ph (ofi_ops.c) did not arm emits nothing. */
void ofi_prof_attach(void *comm, ncclProfilerCallback_t cb);
void ofi_prof_detach(void *comm);
/* ep_lock held, l->prof set: r's part on l (a send's, or buffer idx's of a receive) was
 * posted; op completed (or failed). */
void ofi_prof_posted(struct ofi_lane *l, struct ofi_req *r, int idx);
void ofi_prof_done(struct ofi_lane *l, struct ofi_req *r, const struct ofi_op *op);
/* r completed: what is still open stops, the record is disarmed. */
void ofi_prof_end(struct ofi_comm *c, struct ofi_req *r);

/* ofi_conn.c */
ncclResult_t ofi_listen(const struct braid_vdev *vd, void *handle, void **listen_comm);
ncclResult_t ofi_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			 void *handle, void **send_comm);
ncclResult_t ofi_accept(void *listen_comm, void **recv_comm);
ncclResult_t ofi_close_comm(void *comm);
ncclResult_t ofi_close_listen(void *listen_comm);

/* ofi_ops.c: the backend (braid_ofi_ops) */

#endif
