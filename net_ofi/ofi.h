/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_ofi internals: libfabric FI_EP_RDM backend.
 *
 * One NCCL device per libfabric domain (NIC). Every comm owns its endpoint, CQ and AV, so
 * a comm needs no lock on the data path (NCCL drives a comm from one thread at a time)
 * and a failing peer only poisons its own comm. Set-up goes over the out-of-band TCP
 * socket in plugin/oob.c, which stays open to notice a peer that dies.
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

/* Tag: k in bits 32..59, the NCCL tag in bits 0..31; 60..63 left to the provider. */
#define OFI_TAG_K_MASK 0x0fffffffULL
static inline uint64_t ofi_msg_tag(uint32_t k, int tag)
{
	return (((uint64_t)k & OFI_TAG_K_MASK) << 32) | (uint32_t)tag;
}

#define OFI_MAX_INFLIGHT 32 /* receive requests per comm (NCCL_NET_MAX_REQUESTS) */

/* Size announcements travel with this tag, apart from every data tag. */
#define OFI_TAG_ANNOUNCE (1ULL << 62)

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
	struct braid_ctr_dev *ctr;
	pthread_mutex_t lock; /* fabric/domain opening and the registration cache */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
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
	struct ofi_req *req;
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

	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t peer_addr;
	char ep_name[64];
	size_t ep_name_len;

	struct braid_pool reqs;
	int inflight;
	struct ofi_tag_count tags[OFI_TAG_SLOTS];

	/* size announcements (see the top of this file) */
	int announce;            /* on for this comm */
	size_t inject_size;      /* announcements up to this size need no completion */
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
int ofi_dev_open_domain(struct ofi_dev *d);

/* ofi_mr.c */
ncclResult_t ofi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t ofi_dereg_mr(void *comm, void *mhandle);
void ofi_mr_cache_purge(struct ofi_dev *d);
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

/* ofi_data.c */
ncclResult_t ofi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request);
ncclResult_t ofi_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request);
ncclResult_t ofi_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request);
ncclResult_t ofi_test(void *request, int *done, size_t *sizes, int *nsizes);
/* Sender, size announcements: (re)post the buffers they arrive in; 0 or a fatal -errno. */
int ofi_post_announce_bufs(struct ofi_comm *c);

const char *ofi_strerror(int err);

#endif
