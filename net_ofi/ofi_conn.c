// SPDX-License-Identifier: Apache-2.0
/*
 * listen / connect / accept / close. Set-up runs over the out-of-band TCP socket:
 *
 *   connector                         listener
 *   TCP connect  ------------------>  accept()
 *   HELLO {nonce, provider, ep name} ->  check nonce and provider, open endpoint
 *             <-------------------  REPLY {ep name}
 *
 * Each step is non-blocking; NCCL polls connect/accept until the comm is ready. Every
 * comm has its own endpoint, so there are no connection ids in the tags.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/params.h"

enum { OOB_HELLO = 1, OOB_REPLY = 2 };

struct msg_hello {
	uint64_t nonce;
	uint32_t name_len;
	uint8_t name[64];
	char provider[64];
};

struct msg_reply {
	uint32_t name_len;
	uint8_t name[64];
};

/*
 * Take back every operation still posted before the endpoint closes. Closing an rxm
 * endpoint that still holds receives after its peer's connection broke crashes inside
 * libfabric 1.17 (seen in the conformance suite's kill-sender, ~1 run in 10); cancelling
 * and draining first is also simply the orderly way to hand buffers back.
 */
static void comm_quiesce(struct ofi_comm *c)
{
	struct fi_cq_tagged_entry e[16];
	struct fi_cq_err_entry err;
	uint64_t until;
	int cancelled = 0;
	ssize_t n;

	/* fi_cancel returns 0 when it took the operation back; each then completes once. */
	for (uint32_t i = 0; i < c->reqs.nelem; i++) {
		struct ofi_req *r = braid_pool_at(&c->reqs, i);
		int posted = r->is_send ? 1 : r->next_part;

		if (!braid_pool_is_used(&c->reqs, i))
			continue;
		for (int p = 0; p < posted; p++)
			cancelled += fi_cancel(&c->ep->fid, &r->op[p].fictx) == 0;
	}
	for (int i = 0; c->ann_rx && i < OFI_MAX_INFLIGHT; i++)
		if (!(c->ann_unposted & (1u << i)))
			cancelled += fi_cancel(&c->ep->fid, &c->ann_rx[i].op.fictx) == 0;
	/* Reap them; bounded, since the peer may be gone and the provider slow to answer. */
	until = braid_now_ns() + 200ULL * 1000000ULL;
	while (cancelled > 0 && braid_now_ns() < until) {
		n = fi_cq_read(c->cq, e, 16);
		if (n == -FI_EAVAIL && fi_cq_readerr(c->cq, &err, 0) == 1)
			cancelled--;
		else if (n > 0)
			cancelled -= (int)n;
	}
}

static void comm_free(struct ofi_comm *c)
{
	if (!c)
		return;
	c->magic = BRAID_MAGIC_DEAD;
	if (c->ep && c->cq)
		comm_quiesce(c);
	/* The endpoint first: it stops the provider from touching our buffers. */
	if (c->ep)
		fi_close(&c->ep->fid);
	if (c->cq)
		fi_close(&c->cq->fid);
	if (c->av)
		fi_close(&c->av->fid);
	if (c->pool_mr)
		fi_close(&c->pool_mr->fid);
	if (c->ann_mr)
		fi_close(&c->ann_mr->fid);
	free(c->ann_rx);
	braid_pool_fini(&c->reqs);
	if (c->chan.fd >= 0)
		close(c->chan.fd);
	braid_counters_comm_put(c->ctr);
	free(c);
}

static struct ofi_comm *comm_new(int devidx, int fd)
{
	struct ofi_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->devidx = devidx;
	c->dev = &ofi.devs[devidx];
	braid_oob_chan_init(&c->chan, fd);
	c->deadline_ns = braid_setup_deadline();
	return c;
}

/* Endpoint, CQ, AV and request pool. */
static int comm_open_ep(struct ofi_comm *c, int is_send)
{
	struct ofi_dev *d = c->dev;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	/* A sender may have maxRecvs x 32 sends in flight. */
	uint32_t nreqs = is_send ? BRAID_MAX_RECVS * OFI_MAX_INFLIGHT : OFI_MAX_INFLIGHT;
	const char *step;
	int rc;

	if (d->info->domain_attr->av_type != FI_AV_UNSPEC)
		av_attr.type = d->info->domain_attr->av_type;
	rc = ofi_dev_open_domain(d);
	if (rc)
		return rc;
	step = "fi_endpoint";
	rc = fi_endpoint(d->domain, d->info, &c->ep, NULL);
	if (rc)
		goto fail;
	step = "fi_cq_open";
	rc = fi_cq_open(d->domain, &cq_attr, &c->cq, NULL);
	if (rc)
		goto fail;
	step = "fi_av_open";
	rc = fi_av_open(d->domain, &av_attr, &c->av, NULL);
	if (rc)
		goto fail;
	step = "fi_ep_bind(av)";
	rc = fi_ep_bind(c->ep, &c->av->fid, 0);
	if (rc)
		goto fail;
	step = "fi_ep_bind(cq)";
	rc = fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc)
		goto fail;
	step = "fi_enable";
	rc = fi_enable(c->ep);
	if (rc)
		goto fail;
	step = "fi_getname";
	c->ep_name_len = sizeof(c->ep_name);
	rc = fi_getname(&c->ep->fid, c->ep_name, &c->ep_name_len);
	if (rc)
		goto fail;
	step = "request pool";
	rc = braid_pool_init(&c->reqs, sizeof(struct ofi_req), nreqs);
	if (rc)
		goto fail;
	c->announce = d->announce;
	if (!c->announce)
		return 0;
	c->inject_size = d->info->tx_attr->inject_size;
	step = "registering the request pool";
	rc = ofi_mr_reg_raw(d, c->reqs.mem, c->reqs.elem_size * c->reqs.nelem, FI_SEND,
			    &c->pool_mr, &c->pool_desc);
	if (rc || !is_send)
		goto out;
	step = "announcement buffers";
	c->ann_rx = calloc(OFI_MAX_INFLIGHT, sizeof(*c->ann_rx));
	rc = c->ann_rx ? 0 : -ENOMEM;
	if (!rc)
		rc = ofi_mr_reg_raw(d, c->ann_rx, OFI_MAX_INFLIGHT * sizeof(*c->ann_rx), FI_RECV,
				    &c->ann_mr, &c->ann_desc);
	for (int i = 0; !rc && i < OFI_MAX_INFLIGHT; i++)
		c->ann_rx[i].op.type = OFI_OP_ANNOUNCE_RECV;
	c->ann_unposted = ~0u;
	step = "posting announcement buffers";
	if (!rc)
		rc = ofi_post_announce_bufs(c);
out:
	if (!rc)
		return 0;
fail:
	BRAID_WARN("ofi: %s on device %s (provider %s) failed: %s", step, d->name, ofi.provider,
		   ofi_strerror(rc));
	return rc ? rc : -EIO;
}

static int insert_peer(struct ofi_comm *c, const uint8_t *name, uint32_t len)
{
	int n;

	if (len == 0 || len > sizeof(c->ep_name))
		return -EINVAL;
	n = fi_av_insert(c->av, name, 1, &c->peer_addr, 0, NULL);
	if (n != 1) {
		BRAID_WARN("ofi: fi_av_insert of peer %s on %s failed: %s", c->peer, c->dev->name,
			   ofi_strerror(n < 0 ? n : -FI_EINVAL));
		return n < 0 ? n : -EINVAL;
	}
	return 0;
}

ncclResult_t ofi_listen(int dev, void *handle, void **listen_comm)
{
	struct ofi_listen *l = calloc(1, sizeof(*l));
	ncclResult_t rc;

	if (!l)
		return ncclSystemError;
	rc = braid_setup_listen(BRAID_BACKEND_OFI, "ofi", dev, handle, &l->lsn);
	if (rc != ncclSuccess) {
		free(l);
		return rc;
	}
	l->devidx = dev;
	l->magic = BRAID_MAGIC_LISTEN;
	*listen_comm = l;
	return ncclSuccess;
}

/* One step of the connector's set-up: 0 ready, -EAGAIN not yet, other -errno failed. */
static int connect_step(struct ofi_comm *c)
{
	const void *payload;
	uint32_t len;
	char why[160];
	int rc;

	switch (c->stage) {
	case OFI_STAGE_CONNECTING: {
		struct msg_hello hello = { .nonce = c->nonce, .name_len = (uint32_t)c->ep_name_len };

		rc = braid_oob_connect_done(c->chan.fd);
		if (rc == -EINPROGRESS)
			return -EAGAIN;
		if (rc) {
			BRAID_WARN("ofi: connect to %s: %s (is the peer process alive?)", c->peer,
				   strerror(-rc));
			return rc;
		}
		memcpy(hello.name, c->ep_name, c->ep_name_len);
		snprintf(hello.provider, sizeof(hello.provider), "%s", ofi.provider);
		braid_oob_chan_post(&c->chan, OOB_HELLO, &hello, sizeof(hello));
		c->stage = OFI_STAGE_HELLO;
	}
		/* fall through */
	case OFI_STAGE_HELLO:
		rc = braid_oob_chan_flush(&c->chan);
		if (rc)
			return rc;
		c->stage = OFI_STAGE_REPLY;
		/* fall through */
	case OFI_STAGE_REPLY: {
		const struct msg_reply *reply;

		rc = braid_oob_chan_recv(&c->chan, OOB_REPLY, &payload, &len, why, sizeof(why));
		if (rc == -EAGAIN)
			return rc;
		if (rc == -EPROTO || (!rc && len != sizeof(*reply))) {
			BRAID_WARN("ofi: connect to %s: bad reply: %s", c->peer,
				   rc ? why : "wrong length");
			return -EPROTO;
		}
		if (rc) {
			BRAID_WARN("ofi: connect to %s: the listener closed the connection (%s); "
				   "it refused our hello or died",
				   c->peer, strerror(-rc));
			return rc;
		}
		reply = payload;
		rc = insert_peer(c, reply->name, reply->name_len);
		if (rc)
			return rc;
		c->stage = OFI_STAGE_READY;
		return 0;
	}
	case OFI_STAGE_READY:
		return 0;
	}
	return -EINVAL;
}

ncclResult_t ofi_connect(int dev, const struct braid_conn_opts *opts, const void *handle,
			 void **send_comm)
{
	struct ofi_comm *c = braid_handle_stage_get(handle);
	char peer[64];
	uint64_t nonce;
	ncclResult_t res;
	int rc, fd;

	(void)opts; /* traffic classes: libfabric has fi_tx_attr.tclass; not mapped yet */
	if (!c) {
		res = braid_setup_dial(BRAID_BACKEND_OFI, "ofi", dev, handle, &fd, &nonce, peer,
				       sizeof(peer));
		if (res != ncclSuccess)
			return res;
		c = comm_new(dev, fd);
		if (!c) {
			close(fd);
			return ncclSystemError;
		}
		c->nonce = nonce;
		snprintf(c->peer, sizeof(c->peer), "%s", peer);
		rc = comm_open_ep(c, 1);
		if (rc) {
			comm_free(c);
			return ncclSystemError;
		}
		c->stage = OFI_STAGE_CONNECTING;
		braid_handle_stage_set((void *)handle, c);
	}
	rc = braid_setup_check_deadline(connect_step(c), c->deadline_ns, "ofi", "connect to",
					c->peer);
	if (rc == -EAGAIN)
		return ncclSuccess;
	braid_handle_stage_set((void *)handle, NULL);
	if (rc) {
		comm_free(c);
		return braid_setup_error(rc);
	}
	c->ctr = braid_counters_comm_get(dev, BRAID_CTR_COMM_SEND, c->peer);
	c->magic = BRAID_MAGIC_SEND;
	*send_comm = c;
	BRAID_INFO(NCCL_NET, "ofi: send comm to %s ready on %s", c->peer, c->dev->name);
	return ncclSuccess;
}

/* One step of the acceptor's set-up. */
static int accept_step(struct ofi_listen *l, struct ofi_comm *c)
{
	const void *payload;
	uint32_t len;
	char why[160];
	int rc;

	if (c->stage == OFI_STAGE_HELLO) {
		const struct msg_hello *hello;

		rc = braid_oob_chan_recv(&c->chan, OOB_HELLO, &payload, &len, why, sizeof(why));
		if (rc == -EAGAIN)
			return rc;
		if (rc == -EPROTO || (!rc && len != sizeof(*hello))) {
			BRAID_WARN("ofi: accept on %s from %s: bad hello: %s", l->lsn.addr, c->peer,
				   rc ? why : "wrong length");
			return -EPROTO;
		}
		if (rc) {
			BRAID_WARN("ofi: accept on %s: the connecting peer %s went away (%s)", l->lsn.addr,
				   c->peer, strerror(-rc));
			return rc;
		}
		hello = payload;
		if (hello->nonce != l->lsn.nonce) {
			BRAID_WARN("ofi: accept on %s: peer %s holds a handle for another listener",
				   l->lsn.addr, c->peer);
			return -EPROTO;
		}
		if (strncmp(hello->provider, ofi.provider, sizeof(hello->provider))) {
			BRAID_WARN("ofi: accept on %s: peer %s uses provider \"%.64s\", we use \"%s\"; "
				   "set the same BRAID_OFI_PROVIDER on every rank",
				   l->lsn.addr, c->peer, hello->provider, ofi.provider);
			return -EPROTO;
		}
		rc = comm_open_ep(c, 0);
		if (!rc)
			rc = insert_peer(c, hello->name, hello->name_len);
		if (rc)
			return rc;
		struct msg_reply reply = { .name_len = (uint32_t)c->ep_name_len };

		memcpy(reply.name, c->ep_name, c->ep_name_len);
		braid_oob_chan_post(&c->chan, OOB_REPLY, &reply, sizeof(reply));
		c->stage = OFI_STAGE_REPLY;
	}
	if (c->stage == OFI_STAGE_REPLY) {
		rc = braid_oob_chan_flush(&c->chan);
		if (rc)
			return rc;
		c->stage = OFI_STAGE_READY;
	}
	return 0;
}

ncclResult_t ofi_accept(void *listen_comm, void **recv_comm)
{
	struct ofi_listen *l = listen_comm;
	struct ofi_comm *c = l->pending;
	int rc;

	if (!c) {
		char peer[64];
		int fd;

		rc = braid_setup_answer(&l->lsn, "ofi", &fd, peer, sizeof(peer));
		if (rc == -EAGAIN)
			return ncclSuccess;
		if (rc)
			return ncclSystemError;
		c = comm_new(l->devidx, fd);
		if (!c) {
			close(fd);
			return ncclSystemError;
		}
		snprintf(c->peer, sizeof(c->peer), "%s", peer);
		c->stage = OFI_STAGE_HELLO;
		l->pending = c;
	}
	rc = braid_setup_check_deadline(accept_step(l, c), c->deadline_ns, "ofi", "accept from",
					c->peer);
	if (rc == -EAGAIN)
		return ncclSuccess;
	l->pending = NULL;
	if (rc) {
		comm_free(c);
		return braid_setup_error(rc);
	}
	c->ctr = braid_counters_comm_get(l->devidx, BRAID_CTR_COMM_RECV, c->peer);
	c->magic = BRAID_MAGIC_RECV;
	*recv_comm = c;
	BRAID_INFO(NCCL_NET, "ofi: receive comm from %s ready on %s", c->peer, c->dev->name);
	return ncclSuccess;
}

ncclResult_t ofi_close_send(void *send_comm)
{
	comm_free(send_comm);
	return ncclSuccess;
}

ncclResult_t ofi_close_recv(void *recv_comm)
{
	comm_free(recv_comm);
	return ncclSuccess;
}

ncclResult_t ofi_close_listen(void *listen_comm)
{
	struct ofi_listen *l = listen_comm;

	comm_free(l->pending);
	close(l->lsn.fd);
	l->magic = BRAID_MAGIC_DEAD;
	free(l);
	return ncclSuccess;
}
