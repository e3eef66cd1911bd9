/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_ofi internals: libfabric FI_EP_RDM backend.
 *
 * One NCCL device per libfabric domain (NIC), and ONE endpoint (with its CQ and AV) per
 * device, shared by all comms of the device: on EFA every endpoint is a QP and NCCL opens
 * channels x peers comms, and a process in a ping-pong then polls one CQ, not two. Each
 * comm has a 16-bit id, unique on its device's endpoint and exchanged in the handshake; a
 * message carries the id of the comm it is for in its tag, so the provider's tag matching
 * keeps comms apart.
 *
 * Locking: NCCL drives each comm from one thread at a time, but different comms of one
 * device from different threads at once, and a thread that reads the shared CQ for comm
 * A also completes comm B's operations. The domain is opened FI_THREAD_DOMAIN: braid
 * serialises every libfabric call on a device's objects (endpoint, CQ, AV, MRs) under
 * the device's ep_lock, which also guards every comm's data-path state, the comm-id
 * table and the shared announcement buffers. A completion finds its comm through its
 * context (ofi_op -> comm), never through a lookup; a completion error fails the comm of
 * its operation only. Set-up, comm ids, the AV table and the registration cache use the
 * device's lock (taken before ep_lock where both are held).
 *
 * Data protocol: receiver-driven, like NCCL's IB transport, over libfabric tag matching.
 * irecv posts the group's buffers, each tagged with its comm id and its buffer number
 * (counted from 0 over the connection), and sends the sender an announcement {group,
 * first buffer number, sizes, NCCL tags}. isend waits for the announcement of the current
 * group (a NULL request until then, as ncclIbIsend waits for its FIFO slot), takes the
 * first unused buffer with its NCCL tag (none: a NULL request, as NCCL's), truncates the
 * message to that buffer's size (as ncclIbIsend does) and sends it to exactly that
 * buffer. No message is ever larger than the buffer it matches, so the provider never
 * truncates (libfabric 1.17's shm never completes a truncated receive; tcp's rxm breaks
 * the connection every comm of the device shares). Announcements land in buffers shared
 * by the whole endpoint, sized from the provider's receive queue and posted once (not 32
 * per comm: shm's queue held 32 comms' worth), and carry the destination comm's token.
 *
 * Progress: reading the CQ completes any comm's operations; operations the provider
 * refused for now (-FI_EAGAIN) wait on the device's deferred list and are posted from
 * every comm's progress, not only their own (a rank spinning in isend on one comm must
 * still send what its receive comm owes another peer).
 *
 * Closing: a comm says goodbye over its link (plugin/link.h), then cancels what it has
 * posted and reaps the shared CQ until none of its operations is outstanding, for at
 * most OFI_CLOSE_REAP_MS. If some are still outstanding (a send to a dead peer), the
 * comm is parked on the device instead of freed, so late completions land in live
 * memory; parked comms are freed when the endpoint closes: at backend fini, or when the
 * device's last live comm closes (NCCL before v11 never finalizes, and an endpoint left
 * open at exit can leave things behind, such as shm's /dev/shm region); with
 * FI_MR_ENDPOINT the registrations bound to it keep it open until fini.
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
#include <stdint.h>

#include "plugin/backend.h"
#include "plugin/counters.h"
#include "plugin/mr_cache.h"
#include "plugin/oob.h"
#include "plugin/pool.h"
#include "plugin/link.h"

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

/*
 * Tag: a receive buffer's number in bits 0..43, the destination comm's id in bits 44..59.
 * Announcements have bit 60 and nothing else: their destination comm is in the message.
 * Bits 61..63 are left to the provider: it must offer at least 61 tag bits
 * (mem_tag_format).
 */
#define OFI_TAG_BUF_MASK ((1ULL << 44) - 1)
#define OFI_TAG_ID_SHIFT 44
#define OFI_TAG_ANNOUNCE (1ULL << 60)
#define OFI_TAG_BITS 61
#define OFI_MAX_COMM_IDS 65536 /* 16 bits; id 0 is never used, so 0 means "none" */
static inline uint64_t ofi_msg_tag(uint16_t id, uint64_t buf)
{
	return ((uint64_t)id << OFI_TAG_ID_SHIFT) | (buf & OFI_TAG_BUF_MASK);
}

/* 0 when the provider's tag format leaves braid OFI_TAG_BITS bits; -1 with why. */
int ofi_tag_format_ok(uint64_t mem_tag_format, char *why, size_t whylen);

#define OFI_MAX_INFLIGHT 32 /* receive requests per comm (NCCL_NET_MAX_REQUESTS) */
/* operations a comm may have waiting for the provider: a lane of a fused send comm, every
 * send it may have in flight (maxRecvs x 32) */
#define OFI_BACKLOG (BRAID_MAX_RECVS * OFI_MAX_INFLIGHT)

/* How long closing a comm waits for its cancelled operations before parking it. */
#define OFI_CLOSE_REAP_MS 200

/* Receiver -> sender: "group seq is posted: these buffers". Only the n used entries
 * travel (40 bytes for one buffer), so it usually fits the provider's inject size. */
struct ofi_announce {
	uint16_t dst; /* the destination send comm's id (it is in the tag too) */
	uint16_t n;
	uint32_t token; /* the destination comm's: a message for an older comm is dropped */
	uint32_t seq;
	uint32_t pad;
	uint64_t first; /* number of the group's first buffer */
	struct {
		uint64_t size;
		int32_t tag;
		uint32_t pad;
	} e[BRAID_MAX_RECVS];
};

static inline size_t ofi_announce_len(uint32_t n)
{
	return __builtin_offsetof(struct ofi_announce, e) +
	       (size_t)n * sizeof(((struct ofi_announce *)0)->e[0]);
}
_Static_assert(OFI_MAX_INFLIGHT == 32, "a comm's announcement ring has 32 slots");

/* Address vector entries, shared by the comms to one peer endpoint. */
struct ofi_av_entry {
	struct ofi_av_entry *next;
	fi_addr_t addr;
	uint32_t refs;
	uint32_t len;
	uint8_t name[64];
};
#define OFI_AV_BUCKETS 256

struct ofi_dev {
	char name[64];
	struct fi_info *info; /* our copy, for this domain */
	int mr_local;         /* provider needs descriptors for local buffers */
	int mr_endpoint;      /* MRs bind to one endpoint: no global registrations */
	int mr_virt_addr;
	int mr_prov_key;
	int mr_hmem;        /* FI_MR_HMEM: device buffers always need a registration */
	uint64_t hmem_caps; /* info->caps when the provider reports FI_HMEM here (ofi_hmem.h), else 0 */
	int numa_node;      /* of the NIC, from topo/; -1 unknown */
	char pci_path[256]; /* from topo/; "" unknown */
	struct braid_ctr_dev *ctr;
	pthread_mutex_t lock; /* opening, comm ids, the comm list, the AV table, the MR cache */
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
	uint64_t id_map[OFI_MAX_COMM_IDS / 64]; /* comm ids in use (parked comms keep theirs) */
	uint32_t id_next;          /* ids are handed out round robin: a freed one is reused last */
	struct ofi_comm **by_id;   /* ep_lock: live send comms by id, for announcements */
	struct ofi_comm *comms;    /* every comm holding an id, parked ones included */
	int nlive;                 /* comms holding an id, parked ones not included */
	struct ofi_comm *deferred; /* ep_lock: comms with operations the provider refused */
	struct ofi_av_entry *av_tab[OFI_AV_BUCKETS];
	/* announcements land here, whichever comm they are for */
	struct ofi_announce_slot *ann;
	uint32_t nann;
	uint64_t *ann_unposted; /* bitmap: slots to (re)post */
	int ann_closing;        /* the endpoint closes: post none again */
	struct fid_mr *ann_mr;
	void *ann_desc;
	uint64_t next_key; /* requested MR keys when the provider does not pick them */
	struct braid_mr_cache cache;
};

struct ofi_mr {
	uint32_t magic;              /* BRAID_MAGIC_MR */
	uint8_t fused;               /* 0 here; 1 in a struct ofi_fmr (ofi_fused.c) */
	struct braid_mr_range range; /* references guarded by the device lock */
	struct ofi_dev *dev;
	struct fid_mr *mr; /* NULL when the provider needs no registration for this */
	void *desc;
};

enum ofi_op_type {
	OFI_OP_SEND,
	OFI_OP_RECV,
	OFI_OP_ANNOUNCE_SEND, /* receiver: an announcement sent without inject */
	OFI_OP_ANNOUNCE_RECV, /* a shared announcement buffer */
};

/* The libfabric operation context: fi_context2 first, so the CQ's op_context is an ofi_op. */
struct ofi_op {
	struct fi_context2 fictx;
	uint8_t type;
	uint8_t idx;
	struct ofi_req *req;
	struct ofi_comm *comm; /* whose operation: completions on the shared CQ go there */
};

/* A shared buffer announcements land in (op.req and op.comm are NULL). */
struct ofi_announce_slot {
	struct ofi_op op;
	struct ofi_announce msg;
};

struct ofi_req {
	uint32_t magic; /* BRAID_MAGIC_REQ */
	uint8_t fused;  /* 0 here; 1 in a struct ofi_freq (ofi_fused.c) */
	uint8_t is_send;
	uint8_t done_mask; /* receives: buffers whose data arrived */
	int n;
	int next_part; /* receives: buffers 0..next_part-1 are posted */
	int pending;   /* completions still to come */
	ncclResult_t status;
	struct ofi_comm *comm;
	uint64_t first;     /* number of the (first) buffer it fills */
	uint64_t posted_ns; /* for the stall counter */
	uint8_t stalled;
	size_t size[BRAID_MAX_RECVS]; /* receives: capacity, then what arrived */
	void *buf[BRAID_MAX_RECVS];   /* receives: kept for deferred posting */
	void *desc[BRAID_MAX_RECVS];
	/* A send uses op[0] and nothing after it: send pools hold OFI_SEND_REQ_SIZE bytes
	 * per request, not the whole struct (256 of them per send comm). */
	struct ofi_op op[BRAID_MAX_RECVS + 1]; /* + the announcement */
	struct ofi_announce ann;               /* receives */
};
#define OFI_SEND_REQ_SIZE (offsetof(struct ofi_req, op) + sizeof(struct ofi_op))

/* Sender: the announcement of one receive group, while its sends go out. */
struct ofi_group {
	int arrived;
	uint32_t used; /* bitmask of buffers already sent to */
	struct ofi_announce ann;
};

struct ofi_comm {
	uint32_t magic; /* BRAID_MAGIC_SEND / BRAID_MAGIC_RECV while usable */
	uint8_t fused;  /* 0 here; 1 in a struct ofi_fcomm (ofi_fused.c) */
	uint8_t lane;   /* a lane of a fused comm: its link is the fused comm's */
	int devidx;
	int is_send;
	struct ofi_dev *dev;
	struct braid_link *link; /* to the peer comm: set-up, liveness, goodbye */
	char peer[64];           /* the peer's handshake address, for messages */

	uint16_t id;      /* ours: in the tags of what this comm receives */
	uint16_t peer_id; /* the peer comm's: in the tags of what we send */
	uint32_t token;   /* ours; announcements for us carry it */
	uint32_t peer_token;
	fi_addr_t peer_addr;
	struct ofi_av_entry *av; /* the peer's AV entry, referenced */
	int outstanding;         /* posted operations whose completion has not been read */
	int closing;             /* closeSend/closeRecv started: errors are expected, not news */
	int parked;              /* closed with operations outstanding: freed at fini */
	struct ofi_comm *next, *prev; /* the device's comm list */

	struct braid_pool reqs;
	int inflight;
	uint32_t seq;       /* receiver: next group; sender: group being sent to */
	uint64_t nbufs;     /* receiver: buffers posted so far (the next one's number) */
	uint64_t sent_upto; /* sender: every buffer below was sent to */

	struct fid_mr *pool_mr; /* receive requests hold announcements: registered once */
	void *pool_desc;
	/* sender: announcements arrived, by group */
	struct ofi_group ring[OFI_MAX_INFLIGHT];

	/* receive requests whose parts the provider did not all take (-FI_EAGAIN): posted
	 * from any progress, in order, so nothing ever waits inside a call */
	struct ofi_req *backlog[OFI_BACKLOG];
	uint32_t backlog_head, backlog_tail;
	struct ofi_comm *deferred_next; /* on dev->deferred while the backlog is not empty */
	int on_deferred;

	ncclResult_t error; /* sticky: once the comm failed, every call says so */
	int warned_bye;     /* the peer's goodbye was reported */
	struct braid_ctr_comm *ctr;
};

static inline struct ofi_comm *to_ofi_comm(void *comm)
{
	return comm;
}

static inline struct ofi_req *to_ofi_req(void *request)
{
	return request;
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
/* Fabric, domain and the shared endpoint with its announcement buffers, unless open;
 * 0 or -errno (WARNed). d->lock held. */
int ofi_dev_open_ep(struct ofi_dev *d);
/* Close the shared endpoint, its CQ and AV, and free the parked comms. d->lock held, no
 * live comm on the device (or fini). */
void ofi_dev_close_ep(struct ofi_dev *d);

/* ofi_mr.c */
ncclResult_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t ofi_dereg_mr(void *comm, void *mhandle);
void ofi_mr_cache_purge(struct ofi_dev *d);
/* Register (and with FI_MR_ENDPOINT bind to the shared endpoint) one buffer of ours.
 * Takes ep_lock. */
int ofi_mr_reg_raw(struct ofi_dev *d, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
		   void **desc);
void ofi_mr_close_raw(struct ofi_dev *d, struct fid_mr *mr);

/* ofi_conn.c */
ncclResult_t ofi_listen(const struct braid_vdev *vd, void *handle, void **listen_comm);
ncclResult_t ofi_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			 void *handle, void **send_comm);
ncclResult_t ofi_accept(void *listen_comm, void **recv_comm);
ncclResult_t ofi_close_send(void *send_comm);
ncclResult_t ofi_close_recv(void *recv_comm);
ncclResult_t ofi_close_listen(void *listen_comm);

/* A comm's address blob, sent to the peer over plugin/link.c: the provider's name, the
 * device's shared endpoint name, the comm's id and token. */
struct ofi_blob {
	char provider[64];
	uint32_t name_len;
	uint8_t name[64];
	uint16_t comm_id;
	uint16_t pad;
	uint32_t token;
};

/* What a valid peer blob says. */
struct ofi_peer_addr {
	uint8_t name[64];
	uint32_t name_len;
	uint16_t comm_id;
	uint32_t token;
};

/* The pure check of a peer's blob (no comm, no I/O): 0 and *out, or -EPROTO with the
 * reason in why. provider: the one this process runs. */
int ofi_blob_check(const void *blob, uint32_t len, const char *provider, struct ofi_peer_addr *out,
		   char *why, size_t whylen);

/* fini: free a parked comm, once the endpoint is closed. */
void ofi_comm_free_parked(struct ofi_comm *c);
/* For ofi_fused.c: one comm of the usual kind per NIC of a fused comm (a lane), set up
 * with the fused comm's link. */
size_t ofi_lane_blob_len(void);
struct ofi_comm *ofi_lane_new(int devidx, int is_send, struct braid_link *lk);
int ofi_lane_open(struct ofi_comm *c);
void ofi_lane_blob(const struct ofi_comm *c, void *blob);
int ofi_lane_take_blob(struct ofi_comm *c, const void *blob);
void ofi_lane_ready(struct ofi_comm *c, int is_send);
/* Free a lane; its goodbye went out over the fused comm's link. */
void ofi_lane_free(struct ofi_comm *c);
/* Plain (one-NIC) comms: the backend's entry points dispatch here (ofi_fused.c). */
ncclResult_t ofi_plain_listen(const struct braid_vdev *vd, void *handle, void **listen_comm);
ncclResult_t ofi_plain_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			       void *handle, void **send_comm);
ncclResult_t ofi_plain_accept(void *listen_comm, void **recv_comm);
ncclResult_t ofi_plain_close_listen(void *listen_comm);
void ofi_plain_comm_free(struct ofi_comm *c);

/* ofi_data.c, for fused comms: the size of the buffer an isend with this tag would go to
 * now; 0 and *size, or -EAGAIN (not announced yet, no free buffer with the tag) or the
 * comm's error (a negative ncclResult_t). Takes ep_lock. */
int ofi_send_peek(struct ofi_comm *c, int tag, size_t *size);
/* Read the lane's device CQ and post what waits there (takes ep_lock). */
void ofi_lane_progress(struct ofi_comm *c);

/* ofi_fused.c: entry points for comms of one NIC or several */
ncclResult_t ofi_any_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t ofi_any_dereg_mr(void *comm, void *mhandle);
ncclResult_t ofi_any_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			   void **request);
ncclResult_t ofi_any_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
			   const int *tags, void **mhandles, void **request);
ncclResult_t ofi_any_test(void *request, int *done, size_t *sizes, int *nsizes);

/* ofi_data.c */
ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request);
ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request);
ncclResult_t ofi_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request);
ncclResult_t ofi_test(void *request, int *done, size_t *sizes, int *nsizes);
/* Post the shared announcement buffers not posted yet; 0 or a fatal -errno. ep_lock held. */
int ofi_post_announce_bufs(struct ofi_dev *d);
/* Closing: fi_cancel everything c has posted (ep_lock held). */
void ofi_comm_cancel(struct ofi_comm *c);
/* Closing: what c tells its peer in its goodbye (ep_lock held). */
void ofi_comm_bye(struct ofi_comm *c, struct braid_link_bye *bye);
/* Read the shared CQ and post deferred operations (ep_lock held); 0 or a -errno from
 * fi_cq_read other than -FI_EAGAIN. */
int ofi_dev_progress(struct ofi_dev *d);

const char *ofi_strerror(int err);

#endif
