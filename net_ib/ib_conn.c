// SPDX-License-Identifier: Apache-2.0
/*
 * listen / connect / accept / close. Set-up runs over the out-of-band TCP socket:
 *
 *   connector (sender)                             listener (receiver)
 *   CQ, QPs to INIT, FIFO registered
 *   TCP connect  ----------------------------->   accept()
 *   HELLO {QPNs, PSNs, GID, LID, MTU, FIFO}  --->  check; CQ, QPs, receives, RTR, RTS
 *                <---------------------------   REPLY {QPNs, PSNs, GID, LID, MTU}
 *   QPs to RTR, RTS; READY  ----------------->   comm ready
 *
 * Both payloads carry braid's verbs wire magic, version and exact length, on top of the
 * framed header of plugin/oob.c, so a peer of another version, another backend or no
 * braid at all gets a clear error. Every step is non-blocking.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_ib/ib.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/numa.h"
#include "plugin/params.h"

enum { OOB_IB_HELLO = 0x101, OOB_IB_REPLY = 0x102, OOB_IB_READY = 0x103 };

#define IB_WIRE_MAGIC 0x62726962u /* "brib" */
#define IB_WIRE_VERSION 1

struct ib_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t len; /* sizeof(struct ib_wire) */
	uint64_t nonce;
	uint8_t link_layer;
	uint8_t mtu;
	uint8_t nqps;
	uint8_t port;
	uint16_t lid;
	uint16_t gid_index;
	uint8_t gid[16];
	uint64_t fifo_addr;
	uint32_t fifo_rkey;
	uint32_t qpn[IB_MAX_QPS];
	uint32_t psn[IB_MAX_QPS];
	char dev[64];
} __attribute__((packed));

static void comm_free(struct ib_comm *c)
{
	if (!c)
		return;
	c->magic = BRAID_MAGIC_DEAD;
	ib_comm_unregister(c);
	for (int i = 0; i < c->nqps; i++) {
		if (c->qps[i].qp)
			ibv.destroy_qp(c->qps[i].qp);
		if (c->qps[i].ctr)
			__atomic_store_n(&c->qps[i].ctr->in_use, 0, __ATOMIC_RELEASE);
	}
	if (c->cq)
		ibv.destroy_cq(c->cq);
	if (c->fifo_mr)
		ibv.dereg_mr(c->fifo_mr);
	if (c->pool_mr)
		ibv.dereg_mr(c->pool_mr);
	braid_numa_free(c->fifo, IB_RING * sizeof(*c->fifo));
	braid_pool_fini(&c->reqs);
	if (c->chan.fd >= 0)
		close(c->chan.fd);
	braid_counters_comm_put(c->ctr);
	free(c);
}

static struct ib_comm *comm_new(int devidx, int fd, int is_send)
{
	struct ib_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->devidx = devidx;
	c->dev = &ib.devs[devidx];
	c->hca = c->dev->hca;
	c->is_send = is_send;
	braid_oob_chan_init(&c->chan, fd);
	c->deadline_ns = braid_setup_deadline();
	c->traffic_class = (int)braid_param_int(BRAID_P_IB_TC);
	c->split_bytes = (size_t)braid_param_int(BRAID_P_IB_SPLIT_BYTES);
	ib_comm_register(c);
	return c;
}

/* CQ, QPs (to INIT), request pool; the sender's FIFO. */
static int comm_open(struct ib_comm *c, int nqps)
{
	struct ib_hca *h = c->hca;
	int per_qp = c->is_send ? IB_SQ_DEPTH + 1 : IB_RQ_DEPTH + IB_RING + 8;
	int rc;

	c->nqps = nqps;
	c->cq = ibv.create_cq(h->ctx, nqps * per_qp + 16, NULL, NULL, 0);
	if (!c->cq) {
		rc = errno ? errno : EIO;
		BRAID_WARN("ib: ibv_create_cq on %s failed: %s", h->name, strerror(rc));
		return -rc;
	}
	for (int i = 0; i < nqps; i++) {
		rc = ib_qp_create(c, &c->qps[i], c->is_send);
		if (rc)
			return rc;
	}
	rc = braid_pool_init(&c->reqs, sizeof(struct ib_req),
			     c->is_send ? BRAID_MAX_RECVS * IB_RING : 2 * IB_RING, /* + flushes */
			     c->dev->numa_node);
	if (rc)
		return rc;
	if (!c->is_send) {
		/* receive requests hold the FIFO entries the receiver writes from */
		c->pool_mr = ibv.reg_mr(h->pd, c->reqs.mem, c->reqs.elem_size * c->reqs.nelem,
					IBV_ACCESS_LOCAL_WRITE);
		if (!c->pool_mr)
			goto reg_fail;
		for (int i = 0; i < nqps; i++) {
			rc = ib_qp_post_recvs(c, &c->qps[i], IB_RQ_DEPTH);
			if (rc) {
				BRAID_WARN("ib: posting receives on %s:%d failed: %s", c->dev->name,
					   c->dev->port, strerror(-rc));
				return rc;
			}
		}
		return 0;
	}
	c->fifo = braid_numa_alloc(IB_RING * sizeof(*c->fifo), c->dev->numa_node);
	if (!c->fifo)
		return -ENOMEM;
	c->fifo_mr = ibv.reg_mr(h->pd, c->fifo, IB_RING * sizeof(*c->fifo),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->fifo_mr)
		goto reg_fail;
	return 0;
reg_fail:
	rc = errno ? errno : EIO;
	BRAID_WARN("ib: registering comm buffers on %s failed: %s", h->name, strerror(rc));
	return -rc;
}

static void fill_wire(struct ib_comm *c, struct ib_wire *w, const uint32_t *psn)
{
	struct ib_dev *d = c->dev;

	memset(w, 0, sizeof(*w));
	w->magic = IB_WIRE_MAGIC;
	w->version = IB_WIRE_VERSION;
	w->len = sizeof(*w);
	w->nonce = c->nonce;
	w->link_layer = (uint8_t)d->link_layer;
	w->mtu = (uint8_t)d->mtu;
	w->nqps = (uint8_t)c->nqps;
	w->port = (uint8_t)d->port;
	w->lid = d->lid;
	w->gid_index = (uint16_t)d->gid_index;
	memcpy(w->gid, d->gid.raw, 16);
	if (c->fifo_mr) {
		w->fifo_addr = (uint64_t)(uintptr_t)c->fifo;
		w->fifo_rkey = c->fifo_mr->rkey;
	}
	for (int i = 0; i < c->nqps; i++) {
		w->qpn[i] = c->qps[i].qp->qp_num;
		w->psn[i] = psn[i];
	}
	snprintf(w->dev, sizeof(w->dev), "%s", d->name);
}

/* 0 when the peer's description is usable; -EPROTO with one WARN otherwise. */
static int check_wire(struct ib_comm *c, const void *payload, uint32_t len, int want_nqps,
		      const char *side)
{
	const struct ib_wire *w = payload;

	if (len < offsetof(struct ib_wire, nonce) || w->magic != IB_WIRE_MAGIC) {
		BRAID_WARN("ib: %s %s: the peer's %s is not braid's verbs handshake (%u bytes%s); is "
			   "it running braid with BRAID_BACKEND=ib?",
			   side, c->peer, want_nqps ? "reply" : "hello", len,
			   len >= 4 ? ", wrong magic" : "");
		return -EPROTO;
	}
	if (w->version != IB_WIRE_VERSION || w->len != sizeof(*w) || len != sizeof(*w)) {
		BRAID_WARN("ib: %s %s: the peer speaks braid verbs wire version %u (%u bytes); this "
			   "braid speaks %u (%zu bytes): use the same braid on every rank",
			   side, c->peer, w->version, w->len, IB_WIRE_VERSION, sizeof(*w));
		return -EPROTO;
	}
	if (w->link_layer != c->dev->link_layer) {
		BRAID_WARN("ib: %s %s: the peer's port %s:%u is %s, ours %s:%d is %s", side, c->peer,
			   w->dev, w->port,
			   w->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
			   c->dev->name, c->dev->port,
			   c->dev->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
		return -EPROTO;
	}
	if (w->nqps < 1 || w->nqps > IB_MAX_QPS || (want_nqps && w->nqps != want_nqps)) {
		BRAID_WARN("ib: %s %s: bad QP count %u", side, c->peer, w->nqps);
		return -EPROTO;
	}
	return 0;
}

static int connect_qps(struct ib_comm *c, const struct ib_wire *w, const uint32_t *lpsn)
{
	union ibv_gid rgid;
	enum ibv_mtu mtu = (enum ibv_mtu)(w->mtu < c->dev->mtu ? w->mtu : c->dev->mtu);
	struct braid_ctr_region *r = braid_counters();

	memcpy(rgid.raw, w->gid, 16);
	ib_gid_str(&rgid, c->peer_gid, sizeof(c->peer_gid));
	for (int i = 0; i < c->nqps; i++) {
		int rc = ib_qp_connect(c, &c->qps[i], i, w->qpn[i], w->psn[i], lpsn[i], &rgid,
				       w->lid, mtu);

		if (rc)
			return rc;
		/* a per-QP counter record, when one is free */
		for (int k = 0; r && k < BRAID_CTR_MAX_QPS; k++) {
			struct braid_ctr_qp *q = &r->qps[k];
			uint32_t expect = 0;

			if (!__atomic_compare_exchange_n(&q->in_use, &expect, 1, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_RELAXED))
				continue;
			memset((char *)q + sizeof(q->in_use), 0, sizeof(*q) - sizeof(q->in_use));
			q->dev = c->devidx;
			q->comm = -1;
			q->qpn = c->qps[i].qp->qp_num;
			q->remote_qpn = w->qpn[i];
			q->flow_label = c->qps[i].flow_label;
			q->sport = c->qps[i].sport;
			c->qps[i].ctr = q;
			break;
		}
	}
	return 0;
}

static void log_ready(struct ib_comm *c)
{
	char labels[IB_MAX_QPS * 48] = "";
	size_t used = 0;

	for (int i = 0; i < c->nqps && used < sizeof(labels); i++)
		used += (size_t)snprintf(labels + used, sizeof(labels) - used, "%s%#x->%#x fl %#x sport %u",
					 i ? ", " : "", c->qps[i].qp->qp_num, c->qps[i].remote_qpn,
					 c->qps[i].flow_label, c->qps[i].sport);
	BRAID_INFO(NCCL_NET, "ib: %s comm %s %s on %s:%d ready, peer GID %s, %d QP(s): %s",
		   c->is_send ? "send" : "receive", c->is_send ? "to" : "from", c->peer,
		   c->dev->name, c->dev->port, c->peer_gid, c->nqps, labels);
}

ncclResult_t ib_listen(int dev, void *handle, void **listen_comm)
{
	struct ib_listen *l = calloc(1, sizeof(*l));
	ncclResult_t rc;

	if (!l)
		return ncclSystemError;
	rc = braid_setup_listen(BRAID_BACKEND_IB, "ib", dev, handle, &l->lsn);
	if (rc != ncclSuccess) {
		free(l);
		return rc;
	}
	l->devidx = dev;
	l->magic = BRAID_MAGIC_LISTEN;
	*listen_comm = l;
	return ncclSuccess;
}

static void make_psns(uint32_t *psn, int n)
{
	for (int i = 0; i < n; i++)
		psn[i] = (uint32_t)braid_random_u64() & 0xffffff;
}

/* The comm's counter record index, -1 for the shared overflow record. */
static int32_t ctr_index(const struct braid_ctr_comm *rec)
{
	struct braid_ctr_region *r = braid_counters();

	if (!r || rec < r->comms || rec >= r->comms + BRAID_CTR_MAX_COMMS)
		return -1;
	return (int32_t)(rec - r->comms);
}

static int connect_step(struct ib_comm *c)
{
	const void *payload;
	uint32_t len;
	char why[160];
	int rc;

	switch (c->stage) {
	case IB_STAGE_CONNECTING: {
		struct ib_wire hello;

		rc = braid_oob_connect_done(c->chan.fd);
		if (rc == -EINPROGRESS)
			return -EAGAIN;
		if (rc) {
			BRAID_WARN("ib: connect to %s: %s (is the peer process alive?)", c->peer,
				   strerror(-rc));
			return rc;
		}
		fill_wire(c, &hello, c->psn);
		braid_oob_chan_post(&c->chan, OOB_IB_HELLO, &hello, sizeof(hello));
		c->stage = IB_STAGE_HELLO;
	}
		/* fall through */
	case IB_STAGE_HELLO:
		rc = braid_oob_chan_flush(&c->chan);
		if (rc)
			return rc;
		c->stage = IB_STAGE_REPLY;
		/* fall through */
	case IB_STAGE_REPLY: {
		uint32_t lpsn[IB_MAX_QPS];

		rc = braid_oob_chan_recv(&c->chan, OOB_IB_REPLY, &payload, &len, why, sizeof(why));
		if (rc == -EAGAIN)
			return rc;
		if (rc == -EPROTO) {
			BRAID_WARN("ib: connect to %s: bad reply: %s", c->peer, why);
			return -EPROTO;
		}
		if (rc) {
			BRAID_WARN("ib: connect to %s: the listener closed the connection (%s); it "
				   "refused our hello or died",
				   c->peer, strerror(-rc));
			return rc;
		}
		rc = check_wire(c, payload, len, c->nqps, "connect to");
		if (rc)
			return rc;
		memcpy(lpsn, c->psn, sizeof(lpsn));
		rc = connect_qps(c, payload, lpsn);
		if (rc)
			return rc;
		braid_oob_chan_post(&c->chan, OOB_IB_READY, "R", 1);
		c->stage = IB_STAGE_READY_MSG;
	}
		/* fall through */
	case IB_STAGE_READY_MSG:
		rc = braid_oob_chan_flush(&c->chan);
		if (rc)
			return rc;
		c->stage = IB_STAGE_READY;
		return 0;
	case IB_STAGE_READY:
		return 0;
	}
	return -EINVAL;
}

ncclResult_t ib_connect(int dev, const struct braid_conn_opts *opts, const void *handle,
			void **send_comm)
{
	struct ib_comm *c = braid_handle_stage_get(handle);
	char peer[64];
	uint64_t nonce;
	ncclResult_t res;
	int rc, fd;

	if (!c) {
		res = braid_setup_dial(BRAID_BACKEND_IB, "ib", dev, handle, &fd, &nonce, peer,
				       sizeof(peer));
		if (res != ncclSuccess)
			return res;
		c = comm_new(dev, fd, 1);
		if (!c) {
			close(fd);
			return ncclSystemError;
		}
		c->nonce = nonce;
		if (opts->traffic_class != NCCL_NET_TRAFFIC_CLASS_UNDEF)
			c->traffic_class = opts->traffic_class & 0xff;
		snprintf(c->peer, sizeof(c->peer), "%s", peer);
		rc = comm_open(c, c->dev->nqps);
		if (rc) {
			comm_free(c);
			return ncclSystemError;
		}
		make_psns(c->psn, c->nqps);
		c->stage = IB_STAGE_CONNECTING;
		braid_handle_stage_set((void *)handle, c);
	}
	rc = braid_setup_check_deadline(connect_step(c), c->deadline_ns, "ib", "connect to",
					c->peer);
	if (rc == -EAGAIN)
		return ncclSuccess;
	braid_handle_stage_set((void *)handle, NULL);
	if (rc) {
		comm_free(c);
		return braid_setup_error(rc);
	}
	c->ctr = braid_counters_comm_get(dev, BRAID_CTR_COMM_SEND, c->peer);
	for (int i = 0; i < c->nqps; i++)
		if (c->qps[i].ctr)
			c->qps[i].ctr->comm = ctr_index(c->ctr);
	c->magic = BRAID_MAGIC_SEND;
	*send_comm = c;
	log_ready(c);
	return ncclSuccess;
}

static int accept_step(struct ib_listen *l, struct ib_comm *c)
{
	const void *payload;
	uint32_t len;
	char why[160];
	int rc;

	if (c->stage == IB_STAGE_HELLO) {
		const struct ib_wire *hello;
		struct ib_wire reply;
		uint32_t psn[IB_MAX_QPS];

		rc = braid_oob_chan_recv(&c->chan, OOB_IB_HELLO, &payload, &len, why, sizeof(why));
		if (rc == -EAGAIN)
			return rc;
		if (rc == -EPROTO) {
			BRAID_WARN("ib: accept on %s from %s: bad hello: %s", l->lsn.addr, c->peer, why);
			return -EPROTO;
		}
		if (rc) {
			BRAID_WARN("ib: accept on %s: the connecting peer %s went away (%s)", l->lsn.addr,
				   c->peer, strerror(-rc));
			return rc;
		}
		rc = check_wire(c, payload, len, 0, "accept from");
		if (rc)
			return rc;
		hello = payload;
		if (hello->nonce != l->lsn.nonce) {
			BRAID_WARN("ib: accept on %s: peer %s holds a handle for another listener",
				   l->lsn.addr, c->peer);
			return -EPROTO;
		}
		c->nonce = l->lsn.nonce;
		c->rem_fifo_addr = hello->fifo_addr;
		c->rem_fifo_rkey = hello->fifo_rkey;
		rc = comm_open(c, hello->nqps);
		if (rc)
			return rc;
		make_psns(psn, c->nqps);
		rc = connect_qps(c, hello, psn);
		if (rc)
			return rc;
		fill_wire(c, &reply, psn);
		braid_oob_chan_post(&c->chan, OOB_IB_REPLY, &reply, sizeof(reply));
		c->stage = IB_STAGE_REPLY;
	}
	if (c->stage == IB_STAGE_REPLY) {
		rc = braid_oob_chan_flush(&c->chan);
		if (rc)
			return rc;
		c->stage = IB_STAGE_READY_MSG;
	}
	if (c->stage == IB_STAGE_READY_MSG) {
		rc = braid_oob_chan_recv(&c->chan, OOB_IB_READY, &payload, &len, why, sizeof(why));
		if (rc == -EAGAIN)
			return rc;
		if (rc) {
			BRAID_WARN("ib: accept on %s: peer %s failed to bring its QPs up (%s)", l->lsn.addr,
				   c->peer, rc == -EPROTO ? why : strerror(-rc));
			return rc;
		}
		c->stage = IB_STAGE_READY;
	}
	return 0;
}

ncclResult_t ib_accept(void *listen_comm, void **recv_comm)
{
	struct ib_listen *l = listen_comm;
	struct ib_comm *c = l->pending;
	int rc;

	if (!c) {
		char peer[64];
		int fd;

		rc = braid_setup_answer(&l->lsn, "ib", &fd, peer, sizeof(peer));
		if (rc == -EAGAIN)
			return ncclSuccess;
		if (rc)
			return ncclSystemError;
		c = comm_new(l->devidx, fd, 0);
		if (!c) {
			close(fd);
			return ncclSystemError;
		}
		snprintf(c->peer, sizeof(c->peer), "%s", peer);
		c->stage = IB_STAGE_HELLO;
		l->pending = c;
	}
	rc = braid_setup_check_deadline(accept_step(l, c), c->deadline_ns, "ib", "accept from",
					c->peer);
	if (rc == -EAGAIN)
		return ncclSuccess;
	l->pending = NULL;
	if (rc) {
		comm_free(c);
		return braid_setup_error(rc);
	}
	c->ctr = braid_counters_comm_get(l->devidx, BRAID_CTR_COMM_RECV, c->peer);
	for (int i = 0; i < c->nqps; i++)
		if (c->qps[i].ctr)
			c->qps[i].ctr->comm = ctr_index(c->ctr);
	if (braid_param_int(BRAID_P_IB_FLUSH) == 1 && ib_flush_setup(c->hca, c->dev))
		BRAID_INFO(NCCL_NET, "ib: BRAID_IB_FLUSH=always but the flush QP on %s failed",
			   c->hca->name);
	c->magic = BRAID_MAGIC_RECV;
	*recv_comm = c;
	log_ready(c);
	return ncclSuccess;
}

ncclResult_t ib_close_send(void *send_comm)
{
	comm_free(send_comm);
	return ncclSuccess;
}

ncclResult_t ib_close_recv(void *recv_comm)
{
	comm_free(recv_comm);
	return ncclSuccess;
}

ncclResult_t ib_close_listen(void *listen_comm)
{
	struct ib_listen *l = listen_comm;

	comm_free(l->pending);
	close(l->lsn.fd);
	l->magic = BRAID_MAGIC_DEAD;
	free(l);
	return ncclSuccess;
}
