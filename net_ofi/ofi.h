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
 * A also completes comm B's operations. So the endpoint, CQ and AV, and every comm's
 * data-path state (requests, announcements, errors), belong to the device's ep_lock,
 * taken by every data-path entry. A completion finds its comm through its context
 * (ofi_op -> comm), never through a lookup. A completion error fails the comm of its
 * operation only. Set-up, comm ids and the registration cache use the device's lock
 * (taken before ep_lock where both are held).
 *
 * Closing: a comm cancels what it has posted and reaps the shared CQ (dispatching other
 * comms' completions as usual) until none of its operations is outstanding, for at most
 * OFI_CLOSE_REAP_MS. If some are still outstanding (a send to a dead peer), the comm is
 * parked on the device instead of freed, so late completions land in live memory; parked
 * comms are freed when the endpoint closes: at backend fini, or when the device's last
 * live comm closes (NCCL before v11 never finalizes, and an endpoint left open at exit
 * can leave things behind, such as shm's /dev/shm region); with FI_MR_ENDPOINT the
 * registrations bound to it keep it open until fini. Set-up goes over the
 * out-of-band TCP socket in plugin/oob.c, which stays open to notice a peer that dies.
 *
 * Data protocol: libfabric's own tag matching, nothing on top. The provider already runs
 * a rendezvous for large messages (rxm, efa), so a braid-level handshake per message would
 * only double the messages. A message's tag is (k, NCCL tag): the sender's k-th send with
 * NCCL tag t goes to the receiver's k-th buffer with tag t. That pairs each send with the
 * right buffer of a grouped receive without any ordering from the provider, because NCCL
 * gives every group exactly one send per buffer, and a group's sends come before the
 * next group's. A buffer too small for its message completes with FI_ETRUNC at the
 * receiver, which tells the sender over the handshake socket, so both ends report it.
 *
 * Size announcements (BRAID_OFI_SIZE_CHECK; on for providers that never complete a
 * truncated receive, such as libfabric 1.17's shm, where both ends would hang): the
 * receiver also sends the sender an announcement of each group's buffers (sizes and
 * tags), and the sender sends only once it has checked its message fits. It costs one
 * small message per receive, so it is off where the provider reports FI_ETRUNC.
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
#include "plugin/setup.h"

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
 * Tag: the NCCL tag in bits 0..31, k in bits 32..43, the destination comm's id in bits
 * 44..59; 60..63 are left to the provider. 12 bits of k are enough: at most 256 messages
 * with one tag are outstanding on a comm (maxRecvs x 32), so k mod 4096 never collides.
 */
#define OFI_TAG_K_MASK 0xfffULL
#define OFI_TAG_ID_SHIFT 44
#define OFI_MAX_COMM_IDS 65536 /* 16 bits; id 0 is never used, so 0 means "none" */
static inline uint64_t ofi_msg_tag(uint16_t id, uint32_t k, int tag)
{
	return ((uint64_t)id << OFI_TAG_ID_SHIFT) | (((uint64_t)k & OFI_TAG_K_MASK) << 32) |
	       (uint32_t)tag;
}

#define OFI_MAX_INFLIGHT 32 /* receive requests per comm (NCCL_NET_MAX_REQUESTS) */

/* Size announcements travel with bit 62 and the destination comm's id, apart from every
 * data tag. */
#define OFI_TAG_ANNOUNCE (1ULL << 62)
static inline uint64_t ofi_announce_tag(uint16_t id)
{
	return OFI_TAG_ANNOUNCE | ((uint64_t)id << OFI_TAG_ID_SHIFT);
}

/* How long closing a comm waits for its cancelled operations before parking it. */
#define OFI_CLOSE_REAP_MS 200

/* Receiver -> sender: "group seq is posted: these buffers". Only the n used entries
 * travel (24 bytes for one buffer), so it usually fits the provider's inject size. */
struct ofi_announce {
	uint32_t seq;
	uint32_t n;
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
#define OFI_TAG_SLOTS 256   /* distinct NCCL tags one comm can see */
_Static_assert(OFI_MAX_INFLIGHT == 32, "announcement slots are a 32-bit mask");

/* Per NCCL tag: how many messages (sends, or receive buffers) this comm has had. */
struct ofi_tag_count {
	int32_t tag;
	uint32_t next;
	uint8_t used;
};

struct ofi_dev {
	char name[64];
	struct fi_info *info; /* our copy, for this domain */
	int mr_local;         /* provider needs descriptors for local buffers */
	int mr_endpoint;      /* MRs bind to one endpoint: no global registrations */
	int mr_virt_addr;
	int mr_prov_key;
	int announce; /* size announcements (BRAID_OFI_SIZE_CHECK) */
	int numa_node; /* of the NIC, from topo/; -1 unknown */
	char pci_path[256]; /* from topo/; "" unknown */
	struct braid_ctr_dev *ctr;
	pthread_mutex_t lock; /* opening, comm ids, the comm list, the registration cache */
	struct fid_fabric *fabric;
	struct fid_domain *domain;

	/* The shared endpoint, opened on first use; its CQ and AV. */
	pthread_mutex_t ep_lock; /* these and every comm's data-path state (see the top) */
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	char ep_name[64];
	size_t ep_name_len;
	size_t inject_size;
	uint64_t id_map[OFI_MAX_COMM_IDS / 64]; /* comm ids in use (parked comms keep theirs) */
	uint32_t id_next;    /* ids are handed out round robin: a freed one is reused last */
	struct ofi_comm *comms; /* every comm holding an id, parked ones included */
	int nlive;              /* comms holding an id, parked ones not included */
	uint64_t next_key;    /* requested MR keys when the provider does not pick them */
	struct braid_mr_cache cache;
};

struct ofi_mr {
	uint32_t magic; /* BRAID_MAGIC_MR */
	struct braid_mr_range range; /* references guarded by the device lock */
	struct ofi_dev *dev;
	struct fid_mr *mr; /* NULL when the provider needs no registration for this */
	void *desc;
};

enum ofi_op_type {
	OFI_OP_SEND,
	OFI_OP_RECV,
	OFI_OP_ANNOUNCE_SEND, /* receiver: an announcement sent without inject */
	OFI_OP_ANNOUNCE_RECV, /* sender: a posted announcement buffer */
};

/* The libfabric operation context: fi_context2 first, so the CQ's op_context is an ofi_op. */
struct ofi_op {
	struct fi_context2 fictx;
	uint8_t type;
	uint8_t idx;
	struct ofi_req *req;   /* NULL for announcement buffers */
	struct ofi_comm *comm; /* whose operation: completions on the shared CQ go there */
};

struct ofi_req {
	uint32_t magic; /* BRAID_MAGIC_REQ */
	uint8_t is_send;
	int n;
	int next_part; /* receives: buffers 0..next_part-1 are posted */
	int pending;   /* completions still to come */
	ncclResult_t status;
	struct ofi_comm *comm;
	size_t size[BRAID_MAX_RECVS];  /* receives: capacity, then what arrived */
	void *buf[BRAID_MAX_RECVS];    /* receives: kept for deferred posting */
	void *desc[BRAID_MAX_RECVS];
	uint64_t tag[BRAID_MAX_RECVS]; /* the libfabric tag of each part */
	struct ofi_op op[BRAID_MAX_RECVS + 1]; /* + the announcement */
	struct ofi_announce ann;               /* receives, with size announcements */
};

struct ofi_announce_slot {
	struct ofi_op op;
	struct ofi_announce msg;
};

/* Sender: the announcement of one receive group, while its sends go out. */
struct ofi_group {
	int arrived;
	uint32_t used; /* bitmask of buffers already sent to */
	struct ofi_announce ann;
};

enum ofi_conn_stage {
	OFI_STAGE_CONNECTING, /* TCP connect in progress */
	OFI_STAGE_HELLO,      /* sending our hello */
	OFI_STAGE_REPLY,      /* waiting for / sending the reply */
	OFI_STAGE_READY,
};

struct ofi_comm {
	uint32_t magic; /* BRAID_MAGIC_SEND / BRAID_MAGIC_RECV while usable */
	int devidx;
	struct ofi_dev *dev;
	enum ofi_conn_stage stage;
	uint64_t deadline_ns; /* set-up must finish by then */
	uint64_t nonce;
	struct braid_oob_chan chan;
	char peer[64]; /* the peer's handshake address, for messages */

	uint16_t id;      /* ours: in the tags of what this comm receives */
	uint16_t peer_id; /* the peer comm's: in the tags of what we send */
	fi_addr_t peer_addr;
	int outstanding;  /* posted operations whose completion has not been read */
	int closing;      /* closeSend/closeRecv started: errors are expected, not news */
	int parked;       /* closed with operations outstanding: freed at fini */
	struct ofi_comm *next, *prev; /* the device's comm list */

	struct braid_pool reqs;
	int inflight;
	struct ofi_tag_count tags[OFI_TAG_SLOTS];

	/* size announcements (see the top of this file) */
	int announce;            /* on for this comm */
	struct fid_mr *pool_mr;  /* receive requests hold announcements: registered once */
	void *pool_desc;
	uint32_t seq;            /* receiver: next group; sender: group being sent to */
	struct ofi_announce_slot *ann_rx; /* sender: OFI_MAX_INFLIGHT posted buffers */
	uint32_t ann_unposted;   /* sender: slots to (re)post */
	struct fid_mr *ann_mr;
	void *ann_desc;
	struct ofi_group ring[OFI_MAX_INFLIGHT];

	/* receive requests whose buffers the provider did not all take (-FI_EAGAIN): posted
	 * from progress(), in order, so nothing ever waits inside a call */
	struct ofi_req *backlog[OFI_MAX_INFLIGHT];
	uint32_t backlog_head, backlog_tail;

	ncclResult_t error; /* sticky: once the comm failed, every call says so */
	uint64_t next_liveness_ns;
	struct braid_ctr_comm *ctr;
};

struct ofi_listen {
	uint32_t magic; /* BRAID_MAGIC_LISTEN */
	int devidx;
	struct braid_listener lsn;
	struct ofi_comm *pending; /* the connection being accepted */
};

/* ofi_dev.c */
struct ofi_state {
	int ndevs;
	struct ofi_dev *devs;
	char provider[64];
	int slow; /* the provider is one braid only uses when named (tcp, shm, ...) */
	uint32_t api_version;
};
extern struct ofi_state ofi;
/* Fabric, domain and the shared endpoint, unless open; 0 or -errno (WARNed). d->lock held. */
int ofi_dev_open_ep(struct ofi_dev *d);
/* Close the shared endpoint, its CQ and AV, and free the parked comms. d->lock held, no
 * live comm on the device (or fini). */
void ofi_dev_close_ep(struct ofi_dev *d);

/* ofi_mr.c */
ncclResult_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t ofi_dereg_mr(void *comm, void *mhandle);
void ofi_mr_cache_purge(struct ofi_dev *d);
/* Register (and with FI_MR_ENDPOINT bind to the shared endpoint) one buffer of ours. */
int ofi_mr_reg_raw(struct ofi_dev *d, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
		   void **desc);

/* ofi_conn.c */
ncclResult_t ofi_listen(int dev, void *handle, void **listen_comm);
ncclResult_t ofi_connect(int dev, const struct braid_conn_opts *opts, const void *handle,
			 void **send_comm);
ncclResult_t ofi_accept(void *listen_comm, void **recv_comm);
ncclResult_t ofi_close_send(void *send_comm);
ncclResult_t ofi_close_recv(void *recv_comm);
ncclResult_t ofi_close_listen(void *listen_comm);
/* fini: free a parked comm, once the endpoint is closed. */
void ofi_comm_free_parked(struct ofi_comm *c);

/* ofi_data.c */
ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request);
ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request);
ncclResult_t ofi_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request);
ncclResult_t ofi_test(void *request, int *done, size_t *sizes, int *nsizes);
/* Sender, size announcements: (re)post the buffers they arrive in; 0 or a fatal -errno.
 * Called with ep_lock held. */
int ofi_post_announce_bufs(struct ofi_comm *c);
/* Closing: fi_cancel everything c has posted (ep_lock held). */
void ofi_comm_cancel(struct ofi_comm *c);
/* Read the shared CQ once and dispatch what it holds (ep_lock held); 0 or a -errno from
 * fi_cq_read other than -FI_EAGAIN. */
int ofi_dev_poll(struct ofi_dev *d);

const char *ofi_strerror(int err);

#endif
