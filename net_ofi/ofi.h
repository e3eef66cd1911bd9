/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_ofi internals: libfabric FI_EP_RDM backend.
 *
 * One NCCL device per libfabric domain (NIC). Every comm owns its endpoint, CQ and AV, so
 * a comm needs no lock on the data path (NCCL drives a comm from one thread at a time)
 * and a failing peer only poisons its own comm. Set-up goes over the out-of-band TCP
 * socket in plugin/oob.c, which stays open to notice a peer that dies.
 *
 * Data protocol (receiver-driven, like NCCL's IB transport): irecv posts one tagged
 * receive per buffer, then sends the sender a control message (RTR) listing the group's
 * sizes and tags; isend waits for its group's RTR, picks the buffer whose tag matches and
 * sends straight into it. Tags encode the group sequence and the buffer index, so every
 * message has exactly one posted receive waiting for it: nothing is ever unexpected.
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

/* Tag layout (bits 60..62 are ours; 63 left alone for providers that reserve it). */
#define OFI_TAG_CTRL (1ULL << 62)
#define OFI_TAG_DATA (1ULL << 61)
#define OFI_TAG_ERR (1ULL << 60) /* data tag flag: "your buffer is too small" */
#define OFI_TAG_IDX_BITS 3
#define OFI_TAG_SEQ_MASK 0xffffffffULL
static inline uint64_t ofi_data_tag(uint32_t seq, int idx)
{
	return OFI_TAG_DATA | ((uint64_t)seq << OFI_TAG_IDX_BITS) | (uint64_t)idx;
}

#define OFI_RING 32 /* receive groups in flight per comm (NCCL_NET_MAX_REQUESTS) */

/* Receiver -> sender: "group seq is posted: these buffers, these tags". Only the n used
 * entries travel (24 bytes for one buffer), so it usually fits the provider's inject size
 * and needs no completion. */
struct ofi_rtr {
	uint32_t seq;
	uint32_t n;
	struct {
		uint64_t size;
		int32_t tag;
		uint32_t pad;
	} e[BRAID_MAX_RECVS];
};

static inline size_t ofi_rtr_len(uint32_t n)
{
	return __builtin_offsetof(struct ofi_rtr, e) + (size_t)n * sizeof(((struct ofi_rtr *)0)->e[0]);
}

struct ofi_dev {
	char name[64];
	struct fi_info *info; /* our copy, for this domain */
	int mr_local;         /* provider needs descriptors for local buffers */
	int mr_endpoint;      /* MRs bind to one endpoint: no global registrations */
	int mr_virt_addr;
	int mr_prov_key;
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
	OFI_OP_SEND_DATA,
	OFI_OP_RECV_DATA,
	OFI_OP_SEND_CTRL,
	OFI_OP_RECV_CTRL,
};

/* The libfabric operation context: fi_context2 first, so the CQ's op_context is an ofi_op. */
struct ofi_op {
	struct fi_context2 fictx;
	uint8_t type;
	uint8_t idx;
	struct ofi_req *req;
	struct ofi_comm *comm;
};

struct ofi_req {
	uint32_t magic; /* BRAID_MAGIC_REQ */
	uint8_t is_send;
	int n;
	int next_part;         /* receives: parts 0..n-1 are the buffers, part n the RTR */
	int pending;           /* completions still to come */
	ncclResult_t status;
	struct ofi_comm *comm;
	size_t size[BRAID_MAX_RECVS];
	void *buf[BRAID_MAX_RECVS];  /* receives: where each buffer is, for deferred posting */
	void *desc[BRAID_MAX_RECVS];
	struct ofi_op op[BRAID_MAX_RECVS + 1];
	struct ofi_rtr rtr; /* receive requests: the control message we send */
};

struct ofi_ctrl_slot {
	struct ofi_op op;
	struct ofi_rtr msg;
};

/* An RTR the sender has received and is consuming. */
struct ofi_group {
	int arrived;
	uint32_t used; /* bitmask of buffers already sent to */
	struct ofi_rtr rtr;
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
	size_t inject_size; /* messages up to this size go with fi_tinject (no completion) */

	struct braid_pool reqs;
	struct fid_mr *pool_mr; /* the request pool holds RTR messages: registered once */
	void *pool_desc;
	int inflight;
	uint32_t seq;

	/* receive requests whose parts the provider did not take yet (-FI_EAGAIN): posted
	 * from progress(), in order, so nothing ever waits inside a call */
	struct ofi_req *backlog[OFI_RING];
	uint32_t backlog_head, backlog_tail;

	/* sender side */
	struct ofi_ctrl_slot *ctrl; /* OFI_RING posted RTR receives */
	uint32_t ctrl_unposted;     /* slots to (re)post */
	struct fid_mr *ctrl_mr;
	void *ctrl_desc;
	struct ofi_group ring[OFI_RING];

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
/* Post what the provider refused earlier; 0 or a fatal -errno. */
int ofi_post_deferred(struct ofi_comm *c);

const char *ofi_strerror(int err);

#endif
