// SPDX-License-Identifier: Apache-2.0
/*
 * listen / connect / accept / close. Set-up runs over plugin/link.c; what net_ofi adds is
 * its address blob: the provider's name, the device's shared endpoint name, the comm's id
 * and token. Each side sends to the other's id and receives on its own (ofi.h).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "plugin/clock.h"
#include "plugin/comm_limit.h"
#include "plugin/conn.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/params.h"

/* Late completions of a parked comm count here, not in a slot someone else may hold. */
static struct braid_ctr_comm parked_ctr;

/* ---- the address vector: one entry per peer endpoint, shared by its comms ---- */

static unsigned av_bucket(const uint8_t *name, uint32_t len)
{
	return braid_hash32(name, len) % OFI_AV_BUCKETS;
}

/* A reference to the peer's entry, inserting it on first use; d->lock held. */
static int av_get(struct ofi_comm *c, const uint8_t *name, uint32_t len)
{
	struct ofi_dev *d = c->dev;
	struct ofi_av_entry **head = &d->av_tab[av_bucket(name, len)], *e;
	int n;

	for (e = *head; e; e = e->next)
		if (e->len == len && !memcmp(e->name, name, len))
			break;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->len = len;
		memcpy(e->name, name, len);
		pthread_mutex_lock(&d->ep_lock);
		n = fi_av_insert(d->av, name, 1, &e->addr, 0, NULL);
		pthread_mutex_unlock(&d->ep_lock);
		if (n != 1) {
			free(e);
			BRAID_WARN("ofi: comm %u on %s: fi_av_insert of peer %s failed: %s", c->id,
				   d->name, c->peer, ofi_strerror(n < 0 ? n : -FI_EINVAL));
			return n < 0 ? n : -EINVAL;
		}
		braid_ctr_add(&d->ctr->av_entries, 1);
		e->next = *head;
		*head = e;
	}
	e->refs++;
	c->av = e;
	c->peer_addr = e->addr;
	return 0;
}

/* Drop the comm's reference; the last one removes the entry; d->lock held. */
static void av_put(struct ofi_dev *d, struct ofi_av_entry *e)
{
	struct ofi_av_entry **pp;

	if (!e || --e->refs)
		return;
	for (pp = &d->av_tab[av_bucket(e->name, e->len)]; *pp != e; pp = &(*pp)->next)
		;
	*pp = e->next;
	if (d->av) {
		pthread_mutex_lock(&d->ep_lock);
		fi_av_remove(d->av, &e->addr, 1, 0);
		pthread_mutex_unlock(&d->ep_lock);
		braid_ctr_add(&d->ctr->av_entries, (uint64_t)-1);
	}
	free(e);
}

/* ---- comm life ---- */

/* Everything but the id, the list and the AV entry; nothing of c may be posted any more. */
static void comm_release(struct ofi_comm *c)
{
	if (c->pool_mr)
		ofi_mr_close_raw(c->dev, c->pool_mr);
	braid_pool_fini(&c->reqs);
	braid_link_close(c->link, NULL);
	free(c);
}

/* Give up the id, the AV entry and the device's list; d->lock held. */
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
	av_put(d, c->av);
	c->av = NULL;
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
	if (d->by_id && d->by_id[c->id] == c)
		d->by_id[c->id] = NULL;
	ofi_comm_cancel(c);
	for (;;) {
		rc = ofi_dev_progress(d);
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

/* Tell the peer what this comm did, so that it fails only what can never complete. */
static void comm_say_bye(struct ofi_comm *c)
{
	struct braid_link_bye bye;
	struct ofi_dev *d = c->dev;

	pthread_mutex_lock(&d->ep_lock);
	if (ofi_dev_progress(d) == 0)
		ofi_comm_bye(c, &bye);
	else
		braid_bye_init(&bye, 0, 0);
	pthread_mutex_unlock(&d->ep_lock);
	braid_link_close(c->link, &bye);
	c->link = NULL;
}

static void comm_free(struct ofi_comm *c)
{
	struct braid_ctr_comm *ctr;
	struct ofi_dev *d;
	int left = 0;

	if (!c)
		return;
	d = c->dev;
	if ((c->magic == BRAID_MAGIC_SEND || c->magic == BRAID_MAGIC_RECV) && c->link)
		comm_say_bye(c);
	c->magic = BRAID_MAGIC_DEAD;
	ctr = c->ctr;
	if (c->id)
		left = comm_quiesce(c);
	braid_counters_comm_put(ctr);
	if (left) {
		/* Operations the provider may still complete into c: keep it until the
		 * endpoint closes. */
		BRAID_INFO(NCCL_NET,
			   "ofi: comm %u on %s: %d operation(s) still outstanding "
			   "after %d ms; parked until the endpoint closes",
			   c->id, d->name, left, OFI_CLOSE_REAP_MS);
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

/* An id and a place on the device's list; d->lock held. Ids go round robin, so that a
 * message still on its way to a closed comm is unlikely to find its id in use again. */
static int comm_take_id(struct ofi_dev *d, struct ofi_comm *c)
{
	int rc = braid_comm_limit_check("ofi", d->name, d->nlive, OFI_MAX_COMM_IDS - 1,
					c->is_send ? "connect to" : "accept from", c->peer);

	if (rc)
		return rc;
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

static struct ofi_comm *comm_new(int devidx, int is_send, struct braid_link *lk)
{
	struct ofi_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->devidx = devidx;
	c->dev = &ofi.devs[devidx];
	c->is_send = is_send;
	c->link = lk;
	snprintf(c->peer, sizeof(c->peer), "%s", lk->peer);
	c->token = (uint32_t)braid_random_u64();
	return c;
}

/* The device's shared endpoint, our comm id and request pool. */
static int comm_open(struct ofi_comm *c)
{
	struct ofi_dev *d = c->dev;
	/* A sender may have maxRecvs x 32 sends in flight. */
	uint32_t nreqs = c->is_send ? BRAID_MAX_RECVS * OFI_MAX_INFLIGHT : OFI_MAX_INFLIGHT;
	const char *step;
	int rc;

	step = "request pool";
	rc = braid_pool_init(&c->reqs, c->is_send ? OFI_SEND_REQ_SIZE : sizeof(struct ofi_req),
			     nreqs, d->numa_node);
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
	if (c->is_send) {
		/* Findable by announcements from now on, before the handshake ends: the peer
		 * may post receives, and announce them, the moment it has our READY, and
		 * another thread reading this device's CQ in between would drop them (a send
		 * comm then waited for group 0 for ever: the threads scenario over netns). */
		pthread_mutex_lock(&d->ep_lock);
		d->by_id[c->id] = c;
		pthread_mutex_unlock(&d->ep_lock);
		return 0;
	}
	/* announcements go out of the receive requests */
	step = "registering the request pool";
	rc = ofi_mr_reg_raw(d, c->reqs.mem, c->reqs.elem_size * c->reqs.nelem, FI_SEND, &c->pool_mr,
			    &c->pool_desc);
	if (!rc)
		return 0;
fail:
	BRAID_WARN("ofi: %s on device %s (provider %s, peer %s) failed: %s", step, d->name,
		   ofi.provider, c->peer, ofi_strerror(rc));
	return rc ? rc : -EIO;
}

/* Our blob: the provider, the shared endpoint's name, our comm's id and token. */
static void fill_blob(const struct ofi_comm *c, void *blob, uint32_t *len)
{
	struct ofi_blob b = { .name_len = (uint32_t)c->dev->ep_name_len,
			      .comm_id = c->id,
			      .token = c->token };

	snprintf(b.provider, sizeof(b.provider), "%s", ofi.provider);
	memcpy(b.name, c->dev->ep_name, c->dev->ep_name_len);
	memcpy(blob, &b, sizeof(b));
	*len = sizeof(b);
}

/* Kept apart from the comm (ofi.h) so that tests/fuzz can feed it any bytes. */
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

/* The peer's blob: check it, reach its endpoint; d->lock held. */
static int take_peer_blob(struct ofi_comm *c, const void *blob, uint32_t len)
{
	struct ofi_peer_addr a;
	char why[256];

	if (ofi_blob_check(blob, len, ofi.provider, &a, why, sizeof(why))) {
		BRAID_WARN("ofi: comm %u on %s: peer %s %s", c->id, c->dev->name, c->peer, why);
		return -EPROTO;
	}
	c->peer_id = a.comm_id;
	c->peer_token = a.token;
	return av_get(c, a.name, a.name_len);
}

static int link_hello(void *comm, void *blob, uint32_t *len)
{
	fill_blob(to_ofi_comm(comm), blob, len);
	return 0;
}

static int link_finish(void *comm, const void *blob, uint32_t len)
{
	struct ofi_comm *c = to_ofi_comm(comm);
	int rc;

	pthread_mutex_lock(&c->dev->lock);
	rc = take_peer_blob(c, blob, len);
	pthread_mutex_unlock(&c->dev->lock);
	return rc;
}

static int link_answer(void *listen_comm, struct braid_link *lk, const void *blob, uint32_t len,
		       void *reply, uint32_t *rlen, void **comm)
{
	struct ofi_comm *c = comm_new(to_listen_comm(listen_comm)->dev, 0, lk);
	int rc;

	if (!c)
		return -ENOMEM;
	*comm = c;
	rc = comm_open(c);
	if (!rc) {
		pthread_mutex_lock(&c->dev->lock);
		rc = take_peer_blob(c, blob, len);
		pthread_mutex_unlock(&c->dev->lock);
	}
	if (rc) {
		c->link = NULL; /* still the listener's, which drops it */
		comm_free(c);
		*comm = NULL;
		return rc;
	}
	fill_blob(c, reply, rlen);
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
};

ncclResult_t ofi_plain_listen(const struct braid_vdev *vd, void *handle, void **listen_comm)
{
	int dev = vd->nic[0];

	return braid_listen_comm_open(&ofi_link_ops, vd, handle, ofi.devs[dev].ctr, listen_comm);
}

/* A comm is ready: its counters, and announcements may find it. */
static void comm_ready(struct ofi_comm *c, int is_send)
{
	struct braid_ctr_comm *ctr = braid_counters_comm_get(c->devidx,
							     is_send ? BRAID_CTR_COMM_SEND
								     : BRAID_CTR_COMM_RECV,
							     c->peer);

	pthread_mutex_lock(&c->dev->ep_lock); /* other comms' CQ reads may count for c */
	c->ctr = ctr;
	pthread_mutex_unlock(&c->dev->ep_lock);
	c->magic = is_send ? BRAID_MAGIC_SEND : BRAID_MAGIC_RECV;
	BRAID_INFO(NCCL_NET, "ofi: %s comm %u %s %s (its comm %u) ready on %s",
		   is_send ? "send" : "receive", c->id, is_send ? "to" : "from", c->peer,
		   c->peer_id, c->dev->name);
}

static void *ofi_conn_create(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			     struct braid_link *lk, int *rc)
{
	struct ofi_comm *c = comm_new(vd->nic[0], 1, lk);

	(void)opts; /* traffic classes: libfabric has fi_tx_attr.tclass; not mapped yet */
	*rc = -ENOMEM;
	if (!c)
		return NULL;
	*rc = comm_open(c);
	if (*rc) {
		c->link = NULL; /* the driver closes it */
		comm_free(c);
		return NULL;
	}
	return c;
}

static struct braid_link *ofi_conn_link(void *comm)
{
	return to_ofi_comm(comm)->link;
}

static void ofi_conn_ready(void *comm, int is_send)
{
	comm_ready(to_ofi_comm(comm), is_send);
}

static void ofi_conn_destroy(void *comm)
{
	comm_free(to_ofi_comm(comm));
}

static const struct braid_conn_ops ofi_conn_ops = {
	.link = &ofi_link_ops,
	.create = ofi_conn_create,
	.link_of = ofi_conn_link,
	.ready = ofi_conn_ready,
	.destroy = ofi_conn_destroy,
};

ncclResult_t ofi_plain_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			       void *handle, void **send_comm)
{
	return braid_conn_connect(&ofi_conn_ops, vd, opts, handle, send_comm);
}

ncclResult_t ofi_plain_accept(void *listen_comm, void **recv_comm)
{
	return braid_conn_accept(&ofi_conn_ops, listen_comm, recv_comm);
}

void ofi_plain_comm_free(struct ofi_comm *c)
{
	comm_free(c);
}

ncclResult_t ofi_plain_close_listen(void *listen_comm)
{
	return braid_listen_comm_close(&ofi_link_ops, listen_comm);
}

/* ---- lanes of a fused comm (ofi_fused.c) ---- */

size_t ofi_lane_blob_len(void)
{
	return sizeof(struct ofi_blob);
}

struct ofi_comm *ofi_lane_new(int devidx, int is_send, struct braid_link *lk)
{
	struct ofi_comm *c = comm_new(devidx, is_send, lk);

	if (c)
		c->lane = 1;
	return c;
}

int ofi_lane_open(struct ofi_comm *c)
{
	return comm_open(c);
}

void ofi_lane_blob(const struct ofi_comm *c, void *blob)
{
	uint32_t len;

	fill_blob(c, blob, &len);
}

int ofi_lane_take_blob(struct ofi_comm *c, const void *blob)
{
	int rc;

	pthread_mutex_lock(&c->dev->lock);
	rc = take_peer_blob(c, blob, sizeof(struct ofi_blob));
	pthread_mutex_unlock(&c->dev->lock);
	return rc;
}

void ofi_lane_ready(struct ofi_comm *c, int is_send)
{
	comm_ready(c, is_send);
}

void ofi_lane_free(struct ofi_comm *c)
{
	/* the fused comm said goodbye and closes the link */
	c->link = NULL;
	if (c->magic == BRAID_MAGIC_SEND || c->magic == BRAID_MAGIC_RECV)
		c->magic = BRAID_MAGIC_DEAD;
	comm_free(c);
}
