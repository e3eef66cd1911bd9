// SPDX-License-Identifier: Apache-2.0
/*
 * listen / connect / accept / close. Set-up runs over the out-of-band TCP socket:
 *
 *   connector                                  listener
 *   TCP connect  --------------------------->  accept()
 *   HELLO {nonce, provider, ep name, comm id} ->  check nonce and provider, take an id
 *             <----------------------------  REPLY {ep name, comm id}
 *
 * Each step is non-blocking; NCCL polls connect/accept until the comm is ready. The ep
 * name is the device's shared endpoint; the comm ids go into the tags (see ofi.h): each
 * side sends to the other's id and receives on its own.
 */
#include <errno.h>
#include <sched.h>
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
	uint32_t comm_id; /* the send comm's: announcements go to it */
	uint32_t pad;
};

struct msg_reply {
	uint32_t name_len;
	uint8_t name[64];
	uint32_t comm_id; /* the receive comm's: data goes to it */
};

/* Late completions of a parked comm count here, not in a slot someone else may hold. */
static struct braid_ctr_comm parked_ctr;

/* Everything but the id, the list and the socket; nothing of c may be posted any more. */
static void comm_release(struct ofi_comm *c)
{
	if (c->pool_mr)
		fi_close(&c->pool_mr->fid);
	if (c->ann_mr)
		fi_close(&c->ann_mr->fid);
	free(c->ann_rx);
	braid_pool_fini(&c->reqs);
	if (c->chan.fd >= 0)
		close(c->chan.fd);
	free(c);
}

/* Give up the id and leave the device's list; d->lock held. */
static void comm_unlink(struct ofi_dev *d, struct ofi_comm *c)
{
	pthread_mutex_lock(&d->ep_lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->comms = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&d->ep_lock);
	d->id_map[c->id / 64] &= ~(1ULL << (c->id % 64));
	c->id = 0;
}

/*
 * Take back every operation c still has posted, reaping the shared CQ until none is
 * outstanding; other comms' completions met on the way are dispatched as usual. Bounded,
 * since the peer may be gone and the provider slow to answer. The lock is dropped between
 * reads so that other comms keep moving. Returns how many are still outstanding.
 */
static int comm_quiesce(struct ofi_comm *c)
{
	struct ofi_dev *d = c->dev;
	uint64_t until = braid_now_ns() + OFI_CLOSE_REAP_MS * 1000000ULL;
	int left, rc;

	pthread_mutex_lock(&d->ep_lock);
	c->closing = 1;
	ofi_comm_cancel(c);
	for (;;) {
		rc = ofi_dev_poll(d);
		left = c->outstanding;
		if (!left || rc || braid_now_ns() >= until)
			break;
		pthread_mutex_unlock(&d->ep_lock);
		sched_yield();
		pthread_mutex_lock(&d->ep_lock);
	}
	if (left)
		c->ctr = &parked_ctr; /* under ep_lock: dispatch may be counting right now */
	pthread_mutex_unlock(&d->ep_lock);
	if (rc)
		BRAID_WARN("ofi: closing comm %u on %s (peer %s): fi_cq_read: %s", c->id, d->name,
			   c->peer, ofi_strerror(rc));
	return left;
}

static void comm_free(struct ofi_comm *c)
{
	struct braid_ctr_comm *ctr;
	struct ofi_dev *d;
	int left = 0;

	if (!c)
		return;
	d = c->dev;
	c->magic = BRAID_MAGIC_DEAD;
	ctr = c->ctr;
	if (c->id)
		left = comm_quiesce(c);
	braid_counters_comm_put(ctr);
	if (left) {
		/* Operations the provider may still complete into c: keep it until the
		 * endpoint closes. */
		BRAID_INFO(NCCL_NET, "ofi: comm %u on %s (peer %s): %d operation(s) still "
			   "outstanding after %d ms; parked until the endpoint closes",
			   c->id, d->name, c->peer, left, OFI_CLOSE_REAP_MS);
		if (c->chan.fd >= 0)
			close(c->chan.fd);
		c->chan.fd = -1;
	}
	if (c->id) {
		pthread_mutex_lock(&d->lock);
		d->nlive--;
		if (left)
			c->parked = 1;
		else
			comm_unlink(d, c);
		/* The last one out closes the endpoint, unless registrations are bound to it. */
		if (d->nlive == 0 && !d->mr_endpoint)
			ofi_dev_close_ep(d);
		pthread_mutex_unlock(&d->lock);
	}
	if (!left)
		comm_release(c);
}

void ofi_comm_free_parked(struct ofi_comm *c)
{
	comm_release(c);
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

/* An id and a place on the device's list; d->lock held. Ids go round robin, so that a
 * message still on its way to a closed comm is unlikely to find its id in use again. */
static int comm_take_id(struct ofi_dev *d, struct ofi_comm *c)
{
	for (uint32_t n = 0; n < OFI_MAX_COMM_IDS; n++) {
		uint32_t id = (d->id_next + n) % OFI_MAX_COMM_IDS;

		if (id == 0 || (d->id_map[id / 64] & (1ULL << (id % 64))))
			continue;
		d->id_map[id / 64] |= 1ULL << (id % 64);
		d->id_next = id + 1;
		d->nlive++;
		c->id = (uint16_t)id;
		pthread_mutex_lock(&d->ep_lock);
		c->prev = NULL;
		c->next = d->comms;
		if (d->comms)
			d->comms->prev = c;
		d->comms = c;
		pthread_mutex_unlock(&d->ep_lock);
		return 0;
	}
	BRAID_WARN("ofi: device %s: all %d comm ids are in use (peer %s)", d->name,
		   OFI_MAX_COMM_IDS - 1, c->peer);
	return -ENOSPC;
}

/* The device's shared endpoint, our comm id and request pool. */
static int comm_open_ep(struct ofi_comm *c, int is_send)
{
	struct ofi_dev *d = c->dev;
	/* A sender may have maxRecvs x 32 sends in flight. */
	uint32_t nreqs = is_send ? BRAID_MAX_RECVS * OFI_MAX_INFLIGHT : OFI_MAX_INFLIGHT;
	const char *step;
	int rc;

	step = "request pool";
	rc = braid_pool_init(&c->reqs, sizeof(struct ofi_req), nreqs, d->numa_node);
	if (rc)
		goto fail;
	/* One hold of the lock: the last comm out closes the endpoint under it. */
	pthread_mutex_lock(&d->lock);
	rc = ofi_dev_open_ep(d);
	if (!rc)
		rc = comm_take_id(d, c);
	pthread_mutex_unlock(&d->lock);
	if (rc)
		return rc;
	c->announce = d->announce;
	if (!c->announce)
		return 0;
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
		c->ann_rx[i].op = (struct ofi_op){ .type = OFI_OP_ANNOUNCE_RECV, .comm = c };
	c->ann_unposted = ~0u;
	step = "posting announcement buffers";
	if (!rc) {
		pthread_mutex_lock(&d->ep_lock);
		rc = ofi_post_announce_bufs(c);
		pthread_mutex_unlock(&d->ep_lock);
	}
out:
	if (!rc)
		return 0;
fail:
	BRAID_WARN("ofi: %s on device %s (provider %s, peer %s) failed: %s", step, d->name,
		   ofi.provider, c->peer, ofi_strerror(rc));
	return rc ? rc : -EIO;
}

static int insert_peer(struct ofi_comm *c, const uint8_t *name, uint32_t len, uint32_t peer_id)
{
	struct ofi_dev *d = c->dev;
	int n;

	if (len == 0 || len > sizeof(d->ep_name) || peer_id == 0 || peer_id >= OFI_MAX_COMM_IDS) {
		BRAID_WARN("ofi: comm %u on %s: peer %s sent a bad address (%u bytes) or comm id %u",
			   c->id, d->name, c->peer, len, peer_id);
		return -EPROTO;
	}
	c->peer_id = (uint16_t)peer_id;
	pthread_mutex_lock(&d->ep_lock);
	n = fi_av_insert(d->av, name, 1, &c->peer_addr, 0, NULL);
	pthread_mutex_unlock(&d->ep_lock);
	if (n != 1) {
		BRAID_WARN("ofi: comm %u on %s: fi_av_insert of peer %s failed: %s", c->id, d->name,
			   c->peer, ofi_strerror(n < 0 ? n : -FI_EINVAL));
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
		struct msg_hello hello = { .nonce = c->nonce,
					   .name_len = (uint32_t)c->dev->ep_name_len,
					   .comm_id = c->id };

		rc = braid_oob_connect_done(c->chan.fd);
		if (rc == -EINPROGRESS)
			return -EAGAIN;
		if (rc) {
			BRAID_WARN("ofi: connect to %s: %s (is the peer process alive?)", c->peer,
				   strerror(-rc));
			return rc;
		}
		memcpy(hello.name, c->dev->ep_name, c->dev->ep_name_len);
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
		rc = insert_peer(c, reply->name, reply->name_len, reply->comm_id);
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
	struct braid_ctr_comm *ctr;
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
	ctr = braid_counters_comm_get(dev, BRAID_CTR_COMM_SEND, c->peer);
	pthread_mutex_lock(&c->dev->ep_lock); /* other comms' CQ reads may count for c */
	c->ctr = ctr;
	pthread_mutex_unlock(&c->dev->ep_lock);
	c->magic = BRAID_MAGIC_SEND;
	*send_comm = c;
	BRAID_INFO(NCCL_NET, "ofi: send comm %u to %s (its comm %u) ready on %s", c->id, c->peer,
		   c->peer_id, c->dev->name);
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
			rc = insert_peer(c, hello->name, hello->name_len, hello->comm_id);
		if (rc)
			return rc;
		struct msg_reply reply = { .name_len = (uint32_t)c->dev->ep_name_len,
					   .comm_id = c->id };

		memcpy(reply.name, c->dev->ep_name, c->dev->ep_name_len);
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
	struct braid_ctr_comm *ctr;
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
	ctr = braid_counters_comm_get(l->devidx, BRAID_CTR_COMM_RECV, c->peer);
	pthread_mutex_lock(&c->dev->ep_lock); /* other comms' CQ reads may count for c */
	c->ctr = ctr;
	pthread_mutex_unlock(&c->dev->ep_lock);
	c->magic = BRAID_MAGIC_RECV;
	*recv_comm = c;
	BRAID_INFO(NCCL_NET, "ofi: receive comm %u from %s (its comm %u) ready on %s", c->id,
		   c->peer, c->peer_id, c->dev->name);
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
