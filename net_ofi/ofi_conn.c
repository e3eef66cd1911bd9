// SPDX-License-Identifier: Apache-2.0
/*
 * listen / connect / accept / close, through plugin/conn.c's driver over plugin/link.c.
 * What net_ofi adds is its address blob: one entry per lane (the provider's name, the
 * lane's device's shared endpoint name, the lane's id and token), the peer's lane k
 * reached by our lane k. Each side sends to the other's ids and receives on its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/comm_limit.h"
#include "plugin/conn.h"
#include "plugin/handle.h"
#include "plugin/log.h"

/* Late completions of a parked lane count here, not in a slot someone else may hold. */
static struct braid_ctr_comm parked_ctr;

/* ---- a lane's place on its device ---- */

/* An id and a place on the device's list; d->lock held. Ids go round robin, so that a
 * message still on its way to a closed lane is unlikely to find its id in use again. */
static int lane_take_id(struct ofi_lane *l)
{
	struct ofi_dev *d = l->dev;
	int rc = braid_comm_limit_check("ofi", d->name, d->nlive, OFI_MAX_COMM_IDS - 1,
					l->comm->is_send ? "connect to" : "accept from",
					l->comm->peer);

	if (rc)
		return rc;
	for (uint32_t n = 0; n < OFI_MAX_COMM_IDS; n++) {
		uint32_t id = (d->id_next + n) % OFI_MAX_COMM_IDS;

		if (id == 0 || (d->id_map[id / 64] & (1ULL << (id % 64))))
			continue;
		d->id_map[id / 64] |= 1ULL << (id % 64);
		d->id_next = id + 1;
		d->nlive++;
		l->id = (uint16_t)id;
		pthread_mutex_lock(&d->ep_lock);
		l->prev = NULL;
		l->next = d->lanes;
		if (d->lanes)
			d->lanes->prev = l;
		d->lanes = l;
		pthread_mutex_unlock(&d->ep_lock);
		return 0;
	}
	BRAID_WARN("ofi: device %s: all %d comm ids are in use (peer %s)", d->name,
		   OFI_MAX_COMM_IDS - 1, l->comm->peer);
	return -ENOSPC;
}

/* Give up the id, the AV entry and the device's list; d->lock held. */
static void lane_unlink(struct ofi_lane *l)
{
	struct ofi_dev *d = l->dev;

	pthread_mutex_lock(&d->ep_lock);
	if (d->by_id && d->by_id[l->id] == l) /* a lane that failed before quiescing */
		d->by_id[l->id] = NULL;
	if (l->prev)
		l->prev->next = l->next;
	else
		d->lanes = l->next;
	if (l->next)
		l->next->prev = l->prev;
	pthread_mutex_unlock(&d->ep_lock);
	d->id_map[l->id / 64] &= ~(1ULL << (l->id % 64));
	l->id = 0;
	ofi_av_put(d, l->av);
	l->av = NULL;
	ofi_av_put(d, l->self_av);
	l->self_av = NULL;
}

/* The device's shared endpoint and an id there; a receiving lane registers the request
 * pool, whose requests hold its announcements. */
static int lane_open(struct ofi_lane *l)
{
	struct ofi_comm *c = l->comm;
	struct ofi_dev *d = l->dev;
	int rc;

	/* One hold of the lock: the last lane out closes the endpoint under it. */
	pthread_mutex_lock(&d->lock);
	rc = ofi_dev_open_ep(d);
	if (!rc)
		rc = lane_take_id(l);
	/* flushes read through the endpoint itself (ofi_flush.c) */
	if (!rc && !c->is_send && d->flush)
		rc = ofi_av_ref(d, (const uint8_t *)d->ep_name, (uint32_t)d->ep_name_len,
				"the flush's own address", &l->self_av);
	pthread_mutex_unlock(&d->lock);
	if (rc)
		return rc;
	/* Findable by control messages from now on, before the handshake ends: the peer
	 * may post receives, and announce them, the moment it has our READY, and another
	 * thread reading this device's CQ in between would drop them (a send comm then
	 * waited for group 0 for ever: the threads scenario over netns). A receive lane
	 * takes the sender's weight messages. */
	pthread_mutex_lock(&d->ep_lock);
	d->by_id[l->id] = l;
	pthread_mutex_unlock(&d->ep_lock);
	if (c->is_send)
		return 0;
	/* announcements go out of it, flush reads land in it */
	rc = ofi_mr_reg_raw(d, c->reqs.mem, c->reqs.elem_size * c->reqs.nelem,
			    FI_SEND | (d->flush ? FI_READ : 0), &l->pool_mr, &l->pool_desc);
	if (rc)
		BRAID_WARN("ofi: registering the request pool on device %s (provider %s, peer %s) "
			   "failed: %s",
			   d->name, ofi.provider, c->peer, ofi_strerror(rc));
	return rc;
}

/*
 * Take back every operation l still has posted, reaping its device's CQ until none is
 * outstanding; other comms' completions met on the way are dispatched as usual. Bounded,
 * since the peer may be gone and the provider slow to answer (OFI_CLOSE_REAP_MS: each
 * completion on the device gives the rest that long again, up to OFI_CLOSE_REAP_MAX_MS,
 * ofi.h). The lock is dropped between reads so that other comms keep moving. Returns how
 * many are still outstanding.
 */
static int lane_left(const struct ofi_dev *d, const void *lane)
{
	(void)d;
	return ((const struct ofi_lane *)lane)->outstanding;
}

static int lane_quiesce(struct ofi_lane *l)
{
	struct ofi_dev *d = l->dev;
	int left, rc;

	pthread_mutex_lock(&d->ep_lock);
	l->closing = 1;
	if (d->by_id && d->by_id[l->id] == l)
		d->by_id[l->id] = NULL;
	ofi_lane_cancel(l);
	left = ofi_dev_reap(d, lane_left, l, 1, &rc);
	if (left)
		l->ctr = &parked_ctr; /* under ep_lock: dispatch may be counting right now */
	pthread_mutex_unlock(&d->ep_lock);
	if (rc)
		BRAID_WARN("ofi: closing lane %u on %s (peer %s): fi_cq_read: %s", l->id, d->name,
			   l->comm->peer, ofi_strerror(rc));
	if (left)
		BRAID_INFO(NCCL_NET,
			   "ofi: lane %u on %s: %d operation(s) still outstanding after %d ms; "
			   "parked until the endpoint closes",
			   l->id, d->name, left, OFI_CLOSE_REAP_MS);
	return left;
}

/* ---- comm life ---- */

/* Tell the peer what this comm did, so that it fails only what can never complete. */
static void comm_say_bye(struct ofi_comm *c)
{
	struct braid_link_bye bye;

	ofi_comm_bye(c, &bye);
	braid_link_close(c->link, &bye);
	c->link = NULL;
}

/*
 * Lanes with operations still outstanding are parked; the comm is freed by whichever
 * comes last: this call, or the close of a parked lane's endpoint. nparked holds one
 * extra reference for this call, so that an endpoint closed here frees nothing under it.
 */
static void comm_free(struct ofi_comm *c)
{
	int left[BRAID_VDEV_MAX_NICS], parked = 0;

	if (!c)
		return;
	/* Requests closed in flight no longer use their registrations (ofi_dereg_mr) */
	for (uint32_t i = 0; i < c->reqs.nelem; i++) {
		struct ofi_req *r = braid_pool_at(&c->reqs, i);

		if (braid_pool_is_used(&c->reqs, i) &&
		    (r->magic == BRAID_MAGIC_REQ || r->magic == BRAID_MAGIC_FLUSH))
			ofi_req_hold_mrs(r, -1);
	}
	/* What waits in a backlog is never posted now: the goodbye's progress would post it
	 * with registrations NCCL may have dropped before closing (ncclCommAbort). */
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];

		if (!l->id)
			continue;
		pthread_mutex_lock(&l->dev->ep_lock);
		ofi_lane_undefer(l);
		pthread_mutex_unlock(&l->dev->ep_lock);
	}
	if ((c->magic == BRAID_MAGIC_SEND || c->magic == BRAID_MAGIC_RECV) && c->link)
		comm_say_bye(c);
	c->magic = BRAID_MAGIC_DEAD;
	for (int k = 0; k < c->nlanes; k++) {
		left[k] = c->lane[k].id ? lane_quiesce(&c->lane[k]) : 0;
		parked += left[k] > 0;
	}
	__atomic_store_n(&c->nparked, parked + 1, __ATOMIC_RELEASE);
	braid_counters_comm_put(c->ctr);
	c->ctr = NULL;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];
		struct ofi_dev *d = l->dev;

		if (!l->id)
			continue;
		pthread_mutex_lock(&d->lock);
		d->nlive--;
		pthread_mutex_lock(&d->ep_lock);
		l->parked = left[k] > 0;
		pthread_mutex_unlock(&d->ep_lock);
		if (!l->parked)
			lane_unlink(l);
		/* The last one out closes the endpoint, unless registrations are bound to it. */
		if (d->nlive == 0 && !d->mr_endpoint)
			ofi_dev_close_ep(d);
		pthread_mutex_unlock(&d->lock);
	}
	if (__atomic_sub_fetch(&c->nparked, 1, __ATOMIC_ACQ_REL) == 0)
		ofi_comm_release(c);
}

static int comm_open(struct ofi_comm *c)
{
	for (int k = 0; k < c->nlanes; k++) {
		int rc = lane_open(&c->lane[k]);

		if (rc)
			return rc;
	}
	return 0;
}

/* ---- the handshake blob ---- */

static void fill_blob(const struct ofi_comm *c, void *blob, uint32_t *len)
{
	struct ofi_blob_head h = { OFI_BLOB_MAGIC, c->dev_nics, c->used };
	char *p = blob;

	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (int k = 0; k < c->nlanes; k++, p += sizeof(struct ofi_blob)) {
		const struct ofi_lane *l = &c->lane[k];
		struct ofi_blob b = { .name_len = (uint32_t)l->dev->ep_name_len,
				      .comm_id = l->id,
				      .token = l->token };

		snprintf(b.provider, sizeof(b.provider), "%s", ofi.provider);
		memcpy(b.name, l->dev->ep_name, l->dev->ep_name_len);
		memcpy(p, &b, sizeof(b));
	}
	*len = (uint32_t)(p - (char *)blob);
}

/* Kept apart from the comm (ofi_wire.h) so that tests/fuzz can feed it any bytes. */
int ofi_blob_check(const void *blob, uint32_t len, const char *provider, struct ofi_peer_addr *out,
		   char *why, size_t whylen)
{
	struct ofi_blob b;

	if (len != sizeof(b)) {
		snprintf(why, whylen, "sent a %u-byte address, expected %zu", len, sizeof(b));
		return -EPROTO;
	}
	memcpy(&b, blob, sizeof(b));
	if (strncmp(b.provider, provider, sizeof(b.provider))) {
		snprintf(why, whylen,
			 "uses provider \"%.64s\", we use \"%s\"; set the same BRAID_OFI_PROVIDER "
			 "on every rank",
			 b.provider, provider);
		return -EPROTO;
	}
	if (b.name_len == 0 || b.name_len > sizeof(b.name) || b.comm_id == 0) {
		snprintf(why, whylen, "sent a bad address (%u bytes) or comm id %u", b.name_len,
			 b.comm_id);
		return -EPROTO;
	}
	_Static_assert(sizeof(out->name) == sizeof(b.name), "ofi_peer_addr.name != ofi_blob.name");
	memcpy(out->name, b.name, b.name_len);
	out->name_len = b.name_len;
	out->comm_id = b.comm_id;
	out->token = b.token;
	return 0;
}

/*
 * The head of a peer's blob: its device has as many NICs as ours (dev_nics), and its
 * lanes are well formed. 0 and *h, or -EPROTO after a WARN. Which NICs it uses
 * (h->used) the caller checks.
 */
static int peer_blob_head(const char *dev, int dev_nics, const char *peer, const void *blob,
			  uint32_t len, struct ofi_blob_head *h)
{
	if (len < sizeof(*h))
		goto bad;
	memcpy(h, blob, sizeof(*h));
	if (h->magic != OFI_BLOB_MAGIC || h->nlanes > BRAID_VDEV_MAX_NICS || h->used >> h->nlanes ||
	    len != sizeof(*h) + (uint32_t)__builtin_popcount(h->used) * sizeof(struct ofi_blob))
		goto bad;
	if ((int)h->nlanes != dev_nics) {
		BRAID_WARN("ofi: comm on %s with %s: the peer's device has %u NICs, ours %d; "
			   "fuse the same number of NICs on every rank (BRAID_MERGE, "
			   "NCCL_NET_FORCE_MERGE)",
			   dev, peer, h->nlanes, dev_nics);
		return -EPROTO;
	}
	return 0;
bad:
	BRAID_WARN("ofi: comm on %s with %s: the peer's address is not one of braid's ofi (%u "
		   "bytes); does it run the same braid?",
		   dev, peer, len);
	return -EPROTO;
}

/* The peer's blob: lanes on the same NICs as ours, each checked and reached. */
static int take_peer_blob(struct ofi_comm *c, const void *blob, uint32_t len)
{
	const char *lane_blob = (const char *)blob + sizeof(struct ofi_blob_head);
	struct ofi_blob_head h;
	char why[256];
	int rc = peer_blob_head(c->lane[0].dev->name, c->dev_nics, c->peer, blob, len, &h);

	if (rc)
		return rc;
	if (h.used != c->used) {
		BRAID_WARN("ofi: comm on %s with %s: the peer has lanes on NICs %#x of its device, "
			   "we on %#x",
			   c->lane[0].dev->name, c->peer, h.used, c->used);
		return -EPROTO;
	}
	for (int k = 0; k < c->nlanes; k++, lane_blob += sizeof(struct ofi_blob)) {
		struct ofi_lane *l = &c->lane[k];
		struct ofi_peer_addr a;

		if (ofi_blob_check(lane_blob, sizeof(struct ofi_blob), ofi.provider, &a, why,
				   sizeof(why))) {
			BRAID_WARN("ofi: lane %u on %s: peer %s %s", l->id, l->dev->name, c->peer,
				   why);
			return -EPROTO;
		}
		l->peer_id = a.comm_id;
		l->peer_token = a.token;
		pthread_mutex_lock(&l->dev->lock);
		rc = ofi_av_get(l, a.name, a.name_len);
		pthread_mutex_unlock(&l->dev->lock);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- plugin/link.c and plugin/conn.c callbacks ---- */

static int link_hello(void *comm, void *blob, uint32_t *len)
{
	fill_blob(to_ofi_comm(comm), blob, len);
	return 0;
}

static int link_finish(void *comm, const void *blob, uint32_t len)
{
	return take_peer_blob(to_ofi_comm(comm), blob, len);
}

static int link_answer(void *listen_comm, struct braid_link *lk, const void *blob, uint32_t len,
		       void *reply, uint32_t *rlen, void **comm)
{
	const struct braid_vdev *lvd = &to_listen_comm(listen_comm)->vdev;
	struct ofi_blob_head h;
	struct braid_vdev use;
	struct ofi_comm *c;
	int rc = peer_blob_head(ofi.devs[lvd->nic[0]].name, lvd->n, lk->peer, blob, len, &h);

	if (rc)
		return rc;
	rc = ofi_live_take(lvd, h.used, lk->peer, &use);
	if (rc) {
		BRAID_WARN("ofi: accept from %s on %s: the peer names no lane on this device's %d "
			   "NICs (%#x)",
			   lk->peer, ofi.devs[lvd->nic[0]].name, lvd->n, h.used);
		return rc;
	}
	c = ofi_comm_alloc(&use, 0, lk);
	if (!c)
		return -ENOMEM;
	c->dev_nics = (uint8_t)lvd->n;
	c->used = h.used;
	rc = comm_open(c);
	if (!rc)
		rc = take_peer_blob(c, blob, len);
	if (rc) {
		c->link = NULL; /* still the listener's, which drops it */
		comm_free(c);
		return rc;
	}
	fill_blob(c, reply, rlen);
	*comm = c;
	return 0;
}

static void link_discard(void *comm)
{
	comm_free(to_ofi_comm(comm));
}

static const struct braid_link_ops ofi_link_ops = {
	.who = "ofi",
	.kind = BRAID_BACKEND_OFI,
	.hello = link_hello,
	.finish = link_finish,
	.answer = link_answer,
	.discard = link_discard,
	.handle_nics = ofi_live_fill_handle, /* the NICs that are down (ofi_live.c) */
};

/* A comm is ready: its counters, and it becomes NCCL's. */
static void comm_ready(struct ofi_comm *c, int is_send)
{
	struct braid_ctr_comm *ctr = braid_counters_comm_get(c->lane[0].devidx,
							     is_send ? BRAID_CTR_COMM_SEND
								     : BRAID_CTR_COMM_RECV,
							     c->peer);

	c->ctr = ctr;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];

		pthread_mutex_lock(&l->dev->ep_lock); /* other comms' CQ reads may count */
		l->ctr = ctr;
		pthread_mutex_unlock(&l->dev->ep_lock);
		if (k < BRAID_CTR_MAX_LANES) {
			ctr->lanes[k].dev = l->devidx;
			ctr->lanes[k].weight_ppm = (uint32_t)(braid_stripe_weight(&c->stripe, k) *
							      1000000);
		}
	}
	ctr->nlanes = (uint32_t)c->nlanes;
	/* A fused sender in adaptive mode tells the receiver its weights, injected. */
	c->weights_on = is_send && c->nlanes > 1 && c->stripe.cfg.mode == BRAID_STRIPE_ADAPTIVE;
	if (c->weights_on && c->lane[0].dev->inject_size < ofi_announce_len(0)) {
		c->weights_on = 0;
		BRAID_INFO(NCCL_NET | NCCL_INIT,
			   "ofi: send comm to %s: provider %s injects %zu bytes, a weight message "
			   "needs %zu: the receiver cuts equal shares",
			   c->peer, ofi.provider, c->lane[0].dev->inject_size, ofi_announce_len(0));
	}
	ofi_move_attach(c);
	c->magic = is_send ? BRAID_MAGIC_SEND : BRAID_MAGIC_RECV;
	BRAID_INFO(NCCL_NET, "ofi: %s comm %s %s ready over %d NIC(s) (%s lane %u, its %u first)",
		   is_send ? "send" : "receive", is_send ? "to" : "from", c->peer, c->nlanes,
		   c->lane[0].dev->name, c->lane[0].id, c->lane[0].peer_id);
}

static void *conn_create(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			 struct braid_link *lk, int *rc)
{
	struct braid_vdev use;
	uint32_t used = ofi_live_pick(vd, lk, &use);
	struct ofi_comm *c = ofi_comm_alloc(&use, 1, lk);

	(void)opts; /* traffic classes: libfabric has fi_tx_attr.tclass; not mapped yet */
	*rc = -ENOMEM;
	if (!c)
		return NULL;
	c->dev_nics = (uint8_t)vd->n;
	c->used = used;
	*rc = comm_open(c);
	if (*rc) {
		c->link = NULL; /* the driver closes it */
		comm_free(c);
		return NULL;
	}
	return c;
}

static struct braid_link *conn_link(void *comm)
{
	return to_ofi_comm(comm)->link;
}

static void conn_ready(void *comm, int is_send)
{
	comm_ready(to_ofi_comm(comm), is_send);
}

static void conn_destroy(void *comm)
{
	comm_free(to_ofi_comm(comm));
}

static const struct braid_conn_ops ofi_conn_ops = {
	.link = &ofi_link_ops,
	.create = conn_create,
	.link_of = conn_link,
	.ready = conn_ready,
	.destroy = conn_destroy,
};

ncclResult_t ofi_listen(const struct braid_vdev *vd, void *handle, void **listen_comm)
{
	return braid_listen_comm_open(&ofi_link_ops, vd, handle, ofi.devs[vd->nic[0]].ctr,
				      listen_comm);
}

ncclResult_t ofi_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			 void *handle, void **send_comm)
{
	return braid_conn_connect(&ofi_conn_ops, vd, opts, handle, send_comm);
}

ncclResult_t ofi_accept(void *listen_comm, void **recv_comm)
{
	return braid_conn_accept(&ofi_conn_ops, listen_comm, recv_comm);
}

ncclResult_t ofi_close_comm(void *comm)
{
	comm_free(to_ofi_comm(comm));
	return ncclSuccess;
}

ncclResult_t ofi_close_listen(void *listen_comm)
{
	return braid_listen_comm_close(&ofi_link_ops, listen_comm);
}
