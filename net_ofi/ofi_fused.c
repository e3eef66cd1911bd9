// SPDX-License-Identifier: Apache-2.0
/*
 * A comm on a fused device (docs/multirail.md): one *lane* per NIC, each a comm of the
 * usual kind on its own domain and endpoint, all set up over one link (one handshake
 * whose blob carries every lane's address) and closed with one goodbye.
 *
 * libfabric's tagged messages land at the start of the buffer a receive posted, so the
 * receiver decides where each NIC's part of a buffer goes: irecv cuts every buffer into
 * one contiguous part per lane (plugin/stripe.c: by weight from the threshold up, else
 * whole to the lane with the fewest bytes outstanding, the others getting 0 bytes) and
 * posts part k on lane k, whose announcement tells the sender the part's size. isend
 * waits until every lane has its part announced, then sends bytes [off_k, off_k + part_k)
 * of the message on lane k (0 bytes where the message ends before the part). Every lane
 * thus sees the same sequence of buffers and tags: buffer b of the fused comm is buffer b
 * of every lane, so the k-th send with tag t still lands in the k-th receive with tag t,
 * and one goodbye in buffer numbers speaks for all lanes.
 *
 * The weights are the receiver's: the NICs' nominal speeds (equal for equal NICs). The
 * receiver cannot measure a lane's goodput (its receives wait posted, busy or not), so
 * BRAID_STRIPE=adaptive acts on net_ib only; see docs/multirail.md.
 *
 * Objects NCCL holds (comms, requests, registrations) start like the single-NIC ones,
 * with a `fused` byte after the magic, so that every entry point of the backend
 * dispatches on it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "plugin/clock.h"
#include "plugin/conn.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "plugin/stripe.h"

#define FUSED_BLOB_MAGIC 0x6f667573u /* "ofus" */

struct fused_blob_head {
	uint32_t magic;
	uint32_t nlanes;
	/* nlanes lane blobs follow */
};

struct ofi_fcomm {
	uint32_t magic; /* BRAID_MAGIC_SEND / BRAID_MAGIC_RECV */
	uint8_t fused;  /* 1 */
	int is_send;
	int nlanes;
	struct ofi_comm *lane[BRAID_VDEV_MAX_NICS];
	struct braid_link *link;
	struct braid_stripe stripe; /* receiver: the cut of each buffer */
	struct braid_ctr_comm *ctr;
	/* a request whose lanes did not all take their part yet (the provider said "not
	 * now" on one NIC, its receive queue full on another): posted before any later
	 * request, so every lane keeps the order of the buffers */
	struct ofi_freq *backlog;
	struct braid_pool reqs;
};

struct ofi_freq {
	uint32_t magic; /* BRAID_MAGIC_REQ */
	uint8_t fused;  /* 1 */
	int is_send;
	int n;
	struct ofi_fcomm *fc;
	ncclResult_t status;
	uint8_t posted; /* lanes whose part is with the lane comm */
	uint8_t done;   /* lanes whose part completed */
	void *lreq[BRAID_VDEV_MAX_NICS];
	size_t size[BRAID_MAX_RECVS];
	/* sender: what each lane sends */
	char *data;
	size_t off[BRAID_VDEV_MAX_NICS], len[BRAID_VDEV_MAX_NICS];
	int tag;
	void *mh[BRAID_VDEV_MAX_NICS];
	/* receiver: bytes per lane, for the stripe's accounting, and each lane's receive
	 * until its comm took it */
	size_t lane_bytes[BRAID_VDEV_MAX_NICS];
	void *ldata[BRAID_VDEV_MAX_NICS][BRAID_MAX_RECVS];
	size_t lsize[BRAID_VDEV_MAX_NICS][BRAID_MAX_RECVS];
	void *lmh[BRAID_VDEV_MAX_NICS][BRAID_MAX_RECVS];
	int tags[BRAID_MAX_RECVS];
};

struct ofi_fmr {
	uint32_t magic; /* BRAID_MAGIC_MR */
	uint8_t fused;  /* 1 */
	struct braid_mr_range range;
	int nparts;
	void *part[BRAID_VDEV_MAX_NICS];
};

static inline int is_fused(const void *obj)
{
	return ((const struct ofi_comm *)obj)->fused;
}

static inline struct ofi_fcomm *to_fcomm(void *comm)
{
	return comm;
}

/* ---- set-up ---- */

static void fcomm_free(struct ofi_fcomm *fc)
{
	for (int k = 0; k < fc->nlanes; k++)
		if (fc->lane[k])
			ofi_lane_free(fc->lane[k]);
	braid_pool_fini(&fc->reqs);
	braid_counters_comm_put(fc->ctr);
	fc->magic = BRAID_MAGIC_DEAD;
	free(fc);
}

static struct ofi_fcomm *fcomm_new(const struct braid_vdev *vd, int is_send, struct braid_link *lk)
{
	struct ofi_fcomm *fc = calloc(1, sizeof(*fc));
	struct braid_stripe_cfg cfg;
	int rc = 0;

	if (!fc)
		return NULL;
	fc->fused = 1;
	fc->is_send = is_send;
	fc->link = lk;
	if (braid_pool_init(&fc->reqs, sizeof(struct ofi_freq),
			    is_send ? BRAID_MAX_RECVS * OFI_MAX_INFLIGHT : OFI_MAX_INFLIGHT, -1)) {
		free(fc);
		return NULL;
	}
	for (int k = 0; k < vd->n && !rc; k++) {
		fc->lane[k] = ofi_lane_new(vd->nic[k], is_send, lk);
		if (!fc->lane[k]) {
			rc = -ENOMEM;
			break;
		}
		fc->nlanes = k + 1;
		rc = ofi_lane_open(fc->lane[k]);
	}
	if (rc) {
		fcomm_free(fc);
		return NULL;
	}
	braid_stripe_cfg_load(&cfg);
	cfg.mode = BRAID_STRIPE_EQUAL; /* the receiver cannot measure: see the top */
	cfg.batched = 1; /* the sender measures its lanes (counters, the slow-NIC WARN) */
	braid_stripe_init(&fc->stripe, fc->nlanes, NULL, &cfg); /* equal NICs assumed */
	return fc;
}

static int fused_hello(void *comm, void *blob, uint32_t *len)
{
	struct ofi_fcomm *fc = to_fcomm(comm);
	struct fused_blob_head h = { FUSED_BLOB_MAGIC, (uint32_t)fc->nlanes };
	size_t one = ofi_lane_blob_len();

	memcpy(blob, &h, sizeof(h));
	for (int k = 0; k < fc->nlanes; k++)
		ofi_lane_blob(fc->lane[k], (char *)blob + sizeof(h) + (size_t)k * one);
	*len = (uint32_t)(sizeof(h) + (size_t)fc->nlanes * one);
	return 0;
}

/* The peer's lanes: as many as ours, each reached by the lane of the same rank. */
static int take_blob(struct ofi_fcomm *fc, const void *blob, uint32_t len)
{
	size_t one = ofi_lane_blob_len();
	struct fused_blob_head h;
	int rc = 0;

	if (len < sizeof(h))
		goto bad;
	memcpy(&h, blob, sizeof(h));
	if (h.magic != FUSED_BLOB_MAGIC || len != sizeof(h) + h.nlanes * one)
		goto bad;
	if ((int)h.nlanes != fc->nlanes) {
		BRAID_WARN("ofi: fused comm on %s with %s: the peer's device has %u NICs, ours %d; "
			   "fuse the same number of NICs on every rank (BRAID_MERGE, "
			   "NCCL_NET_FORCE_MERGE)",
			   fc->lane[0]->dev->name, fc->lane[0]->peer, h.nlanes, fc->nlanes);
		return -EPROTO;
	}
	for (int k = 0; k < fc->nlanes && !rc; k++)
		rc = ofi_lane_take_blob(fc->lane[k], (const char *)blob + sizeof(h) + k * one);
	return rc;
bad:
	BRAID_WARN("ofi: fused comm on %s with %s: the peer's address is not a fused one (%u "
		   "bytes); does it run braid with the same NICs fused?",
		   fc->lane[0]->dev->name, fc->lane[0]->peer, len);
	return -EPROTO;
}

static int fused_finish(void *comm, const void *blob, uint32_t len)
{
	return take_blob(to_fcomm(comm), blob, len);
}

static int fused_answer(void *listen_comm, struct braid_link *lk, const void *blob, uint32_t len,
			void *reply, uint32_t *rlen, void **comm)
{
	struct ofi_fcomm *fc = fcomm_new(&to_listen_comm(listen_comm)->vdev, 0, lk);
	int rc;

	if (!fc)
		return -ENOMEM;
	rc = take_blob(fc, blob, len);
	if (rc) {
		fc->link = NULL; /* still the listener's, which drops it */
		for (int k = 0; k < fc->nlanes; k++)
			fc->lane[k]->link = NULL;
		fcomm_free(fc);
		return rc;
	}
	fused_hello(fc, reply, rlen);
	*comm = fc;
	return 0;
}

static void fused_discard(void *comm)
{
	struct ofi_fcomm *fc = to_fcomm(comm);

	braid_link_close(fc->link, NULL);
	fcomm_free(fc);
}

static const struct braid_link_ops fused_link_ops = {
	.who = "ofi",
	.kind = BRAID_BACKEND_OFI,
	.hello = fused_hello,
	.finish = fused_finish,
	.answer = fused_answer,
	.discard = fused_discard,
};

static void fcomm_ready(struct ofi_fcomm *fc)
{
	for (int k = 0; k < fc->nlanes; k++)
		ofi_lane_ready(fc->lane[k], fc->is_send);
	fc->ctr = braid_counters_comm_get(fc->lane[0]->devidx,
					  fc->is_send ? BRAID_CTR_COMM_SEND : BRAID_CTR_COMM_RECV,
					  fc->lane[0]->peer);
	fc->ctr->nlanes = (uint32_t)fc->nlanes;
	for (int k = 0; k < fc->nlanes && k < BRAID_CTR_MAX_LANES; k++) {
		fc->ctr->lanes[k].dev = fc->lane[k]->devidx;
		fc->ctr->lanes[k].weight_ppm = (uint32_t)(braid_stripe_weight(&fc->stripe, k) *
							  1000000);
	}
	fc->magic = fc->is_send ? BRAID_MAGIC_SEND : BRAID_MAGIC_RECV;
	BRAID_INFO(NCCL_NET, "ofi: fused %s comm %s %s ready over %d NICs (%s first)",
		   fc->is_send ? "send" : "receive", fc->is_send ? "to" : "from", fc->lane[0]->peer,
		   fc->nlanes, fc->lane[0]->dev->name);
}

/* One goodbye for all lanes: a buffer counts as written (filled) when it is on every
 * lane, since the fused buffer is only whole then. */
static void fcomm_bye(struct ofi_fcomm *fc, struct braid_link_bye *bye)
{
	struct braid_link_bye lb[BRAID_VDEV_MAX_NICS];
	uint64_t lo = UINT64_MAX, hi = 0;

	for (int k = 0; k < fc->nlanes; k++) {
		struct ofi_comm *c = fc->lane[k];

		pthread_mutex_lock(&c->dev->ep_lock);
		if (ofi_dev_progress(c->dev) == 0)
			ofi_comm_bye(c, &lb[k]);
		else
			braid_bye_init(&lb[k], 0, 0);
		pthread_mutex_unlock(&c->dev->ep_lock);
		if (lb[k].base < lo)
			lo = lb[k].base;
		if (lb[k].upto > hi)
			hi = lb[k].upto;
	}
	braid_bye_init(bye, lo, hi);
	for (uint64_t b = lo; b < hi && b - lo < BRAID_BYE_WINDOW; b++) {
		int all = 1;

		for (int k = 0; k < fc->nlanes && all; k++)
			all = braid_bye_has(&lb[k], b);
		if (all)
			braid_bye_add(bye, b);
	}
	/* below lo every lane had all of them: braid_bye_has says so for b < base */
}

static void fcomm_close(struct ofi_fcomm *fc)
{
	struct braid_link_bye bye;

	fcomm_bye(fc, &bye);
	braid_link_close(fc->link, &bye);
	fc->link = NULL;
	fcomm_free(fc);
}

/* ---- dispatch: the backend's entry points ---- */

ncclResult_t ofi_listen(const struct braid_vdev *vd, void *handle, void **listen_comm)
{
	if (vd->n == 1)
		return ofi_plain_listen(vd, handle, listen_comm);
	return braid_listen_comm_open(&fused_link_ops, vd, handle, ofi.devs[vd->nic[0]].ctr,
				      listen_comm);
}

static void *fused_conn_create(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			       struct braid_link *lk, int *rc)
{
	struct ofi_fcomm *fc = fcomm_new(vd, 1, lk);

	*rc = fc ? 0 : -ENOMEM;
	return fc;
}

static struct braid_link *fused_conn_link(void *comm)
{
	return to_fcomm(comm)->link;
}

static void fused_conn_ready(void *comm, int is_send)
{
	fcomm_ready(to_fcomm(comm));
}

static void fused_conn_destroy(void *comm)
{
	struct ofi_fcomm *fc = to_fcomm(comm);

	braid_link_close(fc->link, NULL);
	for (int k = 0; k < fc->nlanes; k++)
		fc->lane[k]->link = NULL;
	fcomm_free(fc);
}

static const struct braid_conn_ops fused_conn_ops = {
	.link = &fused_link_ops,
	.create = fused_conn_create,
	.link_of = fused_conn_link,
	.ready = fused_conn_ready,
	.destroy = fused_conn_destroy,
};

ncclResult_t ofi_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			 void *handle, void **send_comm)
{
	if (vd->n == 1)
		return ofi_plain_connect(vd, opts, handle, send_comm);
	return braid_conn_connect(&fused_conn_ops, vd, opts, handle, send_comm);
}

ncclResult_t ofi_accept(void *listen_comm, void **recv_comm)
{
	if (to_listen_comm(listen_comm)->vdev.n == 1)
		return ofi_plain_accept(listen_comm, recv_comm);
	return braid_conn_accept(&fused_conn_ops, listen_comm, recv_comm);
}

ncclResult_t ofi_close_listen(void *listen_comm)
{
	if (to_listen_comm(listen_comm)->vdev.n == 1)
		return ofi_plain_close_listen(listen_comm);
	return braid_listen_comm_close(&fused_link_ops, listen_comm);
}

ncclResult_t ofi_close_send(void *send_comm)
{
	if (is_fused(send_comm))
		fcomm_close(to_fcomm(send_comm));
	else
		ofi_plain_comm_free(to_ofi_comm(send_comm));
	return ncclSuccess;
}

ncclResult_t ofi_close_recv(void *recv_comm)
{
	return ofi_close_send(recv_comm);
}

ncclResult_t ofi_any_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct ofi_fcomm *fc = comm;
	struct ofi_fmr *f;
	ncclResult_t rc = ncclSuccess;

	if (!is_fused(comm))
		return ofi_reg_mr(comm, data, size, type, mhandle);
	f = calloc(1, sizeof(*f));
	if (!f)
		return ncclSystemError;
	f->fused = 1;
	braid_mr_range_init(&f->range, data, size, type);
	for (int k = 0; k < fc->nlanes && rc == ncclSuccess; k++) {
		rc = ofi_reg_mr(fc->lane[k], data, size, type, &f->part[k]);
		if (rc == ncclSuccess)
			f->nparts = k + 1;
	}
	if (rc != ncclSuccess) {
		for (int k = 0; k < f->nparts; k++)
			ofi_dereg_mr(fc->lane[k], f->part[k]);
		free(f);
		return rc;
	}
	f->magic = BRAID_MAGIC_MR;
	*mhandle = f;
	return ncclSuccess;
}

ncclResult_t ofi_any_dereg_mr(void *comm, void *mhandle)
{
	struct ofi_fmr *f = mhandle;

	if (!f->fused)
		return ofi_dereg_mr(comm, mhandle);
	for (int k = 0; k < f->nparts; k++)
		ofi_dereg_mr(is_fused(comm) ? to_fcomm(comm)->lane[k] : comm, f->part[k]);
	f->magic = BRAID_MAGIC_DEAD;
	free(f);
	return ncclSuccess;
}

/* ---- data ---- */

static void *part_of(void *mhandle, int k)
{
	struct ofi_fmr *f = mhandle;

	return f->fused ? f->part[k] : mhandle;
}

/* Hand the lanes of r not yet posted to their comms, in lane order. 0, or the error. */
static ncclResult_t post_send_lanes(struct ofi_fcomm *fc, struct ofi_freq *r)
{
	for (int k = 0; k < fc->nlanes; k++) {
		ncclResult_t res;

		if (r->posted & (1u << k))
			continue;
		res = ofi_isend(fc->lane[k], r->data + r->off[k], r->len[k], r->tag, r->mh[k],
				&r->lreq[k]);
		if (res != ncclSuccess)
			return res;
		if (!r->lreq[k])
			return ncclSuccess; /* the provider said "not now": later, in order */
		r->posted |= (uint8_t)(1u << k);
		braid_stripe_posted(&fc->stripe, k, r->len[k], braid_now_ns());
		if (fc->ctr && k < BRAID_CTR_MAX_LANES) {
			braid_ctr_add(&fc->ctr->lanes[k].bytes, r->len[k]);
			braid_ctr_add(&fc->ctr->lanes[k].chunks, 1);
		}
	}
	return ncclSuccess;
}

/*
 * Every call moves every lane's device, whatever it waits for: a lane's deferred receive
 * or send (and so the announcement the peer waits for) is posted only by progress on its
 * own device, and a rank spinning on one lane would otherwise starve another (a ring of
 * fused comms deadlocked that way).
 */
static void fused_progress(struct ofi_fcomm *fc)
{
	for (int k = 0; k < fc->nlanes; k++)
		ofi_lane_progress(fc->lane[k]);
}

static int all_posted(const struct ofi_fcomm *fc, const struct ofi_freq *r)
{
	return r->posted == (1u << fc->nlanes) - 1;
}

static ncclResult_t fused_isend(struct ofi_fcomm *fc, void *data, size_t size, int tag,
				void *mhandle, void **request)
{
	size_t part[BRAID_VDEV_MAX_NICS], off = 0;
	struct ofi_freq *r;
	ncclResult_t res;
	int ready = 1;

	fused_progress(fc);
	if (fc->backlog) {
		res = post_send_lanes(fc, fc->backlog);
		if (res != ncclSuccess)
			return res;
		if (!all_posted(fc, fc->backlog))
			return ncclSuccess; /* an earlier send's lanes first */
		fc->backlog = NULL;
	}
	/* every lane's part of the buffer this send goes to must be announced */
	for (int k = 0; k < fc->nlanes; k++) {
		int rc = ofi_send_peek(fc->lane[k], tag, &part[k]);

		if (rc == -EAGAIN)
			ready = 0;
		else if (rc)
			return (ncclResult_t)-rc;
	}
	if (!ready)
		return ncclSuccess;
	r = braid_pool_get(&fc->reqs);
	if (!r)
		return ncclSuccess;
	r->fused = 1;
	r->fc = fc;
	r->is_send = 1;
	r->n = 1;
	r->data = data;
	r->tag = tag;
	for (int k = 0; k < fc->nlanes; k++) {
		/* as one NIC: a message larger than its buffer arrives truncated */
		r->off[k] = off;
		r->len[k] = size > off ? (size - off < part[k] ? size - off : part[k]) : 0;
		r->mh[k] = part_of(mhandle, k);
		off += part[k];
	}
	r->size[0] = size < off ? size : off;
	res = post_send_lanes(fc, r);
	if (res != ncclSuccess && !r->posted) {
		braid_pool_put(&fc->reqs, r);
		return res;
	}
	r->status = res;
	if (!all_posted(fc, r))
		fc->backlog = r;
	r->magic = BRAID_MAGIC_REQ;
	*request = r;
	return ncclSuccess;
}

/* Hand the lanes of receive r not yet posted to their comms, in lane order. */
static ncclResult_t post_recv_lanes(struct ofi_fcomm *fc, struct ofi_freq *r)
{
	for (int k = 0; k < fc->nlanes; k++) {
		ncclResult_t res;

		if (r->posted & (1u << k))
			continue;
		res = ofi_irecv(fc->lane[k], r->n, r->ldata[k], r->lsize[k], r->tags, r->lmh[k],
				&r->lreq[k]);
		if (res != ncclSuccess)
			return res;
		if (!r->lreq[k])
			return ncclSuccess; /* not now: later, in order */
		r->posted |= (uint8_t)(1u << k);
		braid_stripe_posted(&fc->stripe, k, r->lane_bytes[k], braid_now_ns());
	}
	return ncclSuccess;
}

static ncclResult_t fused_irecv(struct ofi_fcomm *fc, int n, void **data, const size_t *sizes,
				const int *tags, void **mhandles, void **request)
{
	struct ofi_freq *r;
	ncclResult_t res;

	fused_progress(fc);
	if (fc->backlog) {
		res = post_recv_lanes(fc, fc->backlog);
		if (res != ncclSuccess)
			return res;
		if (!all_posted(fc, fc->backlog))
			return ncclSuccess; /* an earlier receive's lanes first */
		fc->backlog = NULL;
	}
	r = braid_pool_get(&fc->reqs);
	if (!r)
		return ncclSuccess;
	r->n = n;
	for (int i = 0; i < n; i++) {
		size_t len[BRAID_STRIPE_MAX_LANES], off = 0;
		int first;

		r->tags[i] = tags[i];
		braid_stripe_split(&fc->stripe, sizes[i], len, &first);
		for (int k = 0; k < fc->nlanes; k++) {
			r->ldata[k][i] = (char *)data[i] + off;
			r->lsize[k][i] = len[k];
			r->lmh[k][i] = part_of(mhandles[i], k);
			off += len[k];
			r->lane_bytes[k] += len[k];
		}
	}
	res = post_recv_lanes(fc, r);
	if (!r->posted) {
		/* nothing taken: NCCL calls again (or the error) */
		braid_pool_put(&fc->reqs, r);
		return res;
	}
	r->status = res;
	if (!all_posted(fc, r))
		fc->backlog = r;
	r->fused = 1;
	r->fc = fc;
	r->magic = BRAID_MAGIC_REQ;
	*request = r;
	return ncclSuccess;
}

ncclResult_t ofi_any_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			   void **request)
{
	if (!is_fused(send_comm))
		return ofi_isend(send_comm, data, size, tag, mhandle, request);
	return fused_isend(to_fcomm(send_comm), data, size, tag, mhandle, request);
}

ncclResult_t ofi_any_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
			   const int *tags, void **mhandles, void **request)
{
	if (!is_fused(recv_comm))
		return ofi_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
	return fused_irecv(to_fcomm(recv_comm), n, data, sizes, tags, mhandles, request);
}

/* Sender: the lanes' goodput from their completions, for the counters, and a NIC that
 * runs slow is named once (the receiver's cut does not follow it: see the top). */
static void sender_reaped(struct ofi_fcomm *fc)
{
	double rate, others;
	int slow;

	braid_stripe_reaped(&fc->stripe);
	for (int k = 0; fc->ctr && k < fc->nlanes && k < BRAID_CTR_MAX_LANES; k++)
		fc->ctr->lanes[k].rate_bps = (uint64_t)braid_stripe_rate(&fc->stripe, k);
	slow = braid_stripe_slow_lane(&fc->stripe, &rate, &others);
	if (slow < 0 || slow >= fc->nlanes)
		return;
	BRAID_WARN("ofi: fused send comm to %s: NIC %s carries %.0f MB/s, under half the %.0f "
		   "MB/s of the comm's other NICs; net_ofi splits by the receiver's equal "
		   "shares, so the device runs at the slow NIC's pace. Check its link and path.",
		   fc->lane[0]->peer, fc->lane[slow]->dev->name, rate / 1e6, others / 1e6);
	if (fc->ctr)
		fc->ctr->lanes[slow].slow = 1;
	braid_ctr_add(&fc->lane[slow]->dev->ctr->slow_lanes, 1);
}

static ncclResult_t fused_test(struct ofi_freq *r, int *done, size_t *sizes, int *nsizes)
{
	struct ofi_fcomm *fc = r->fc;
	ncclResult_t res = r->status;

	*done = 0;
	fused_progress(fc);
	if (res == ncclSuccess && !all_posted(fc, r) && fc->backlog == r) {
		res = r->is_send ? post_send_lanes(fc, r) : post_recv_lanes(fc, r);
		if (res == ncclSuccess && all_posted(fc, r))
			fc->backlog = NULL;
	}
	for (int k = 0; k < fc->nlanes && res == ncclSuccess; k++) {
		size_t ls[BRAID_MAX_RECVS];
		int ldone = 0, ln = 0;

		if (!(r->posted & (1u << k)) || (r->done & (1u << k)))
			continue;
		res = ofi_test(r->lreq[k], &ldone, ls, &ln);
		if (res != ncclSuccess || !ldone)
			continue;
		r->done |= (uint8_t)(1u << k);
		for (int i = 0; !r->is_send && i < ln && i < r->n; i++)
			r->size[i] += ls[i];
		if (r->is_send)
			braid_stripe_completed(&fc->stripe, k, r->len[k], braid_now_ns());
	}
	if (r->is_send)
		sender_reaped(fc);
	if (res == ncclSuccess && r->done != (1u << fc->nlanes) - 1)
		return ncclSuccess;
	*done = 1;
	for (int i = 0; i < r->n; i++)
		sizes[i] = r->size[i];
	*nsizes = r->n;
	if (!r->is_send)
		for (int k = 0; k < fc->nlanes; k++)
			braid_stripe_completed(&fc->stripe, k, r->lane_bytes[k], braid_now_ns());
	if (!r->is_send && fc->ctr)
		for (int k = 0; k < fc->nlanes && k < BRAID_CTR_MAX_LANES; k++) {
			braid_ctr_add(&fc->ctr->lanes[k].bytes, r->lane_bytes[k]);
			braid_ctr_add(&fc->ctr->lanes[k].chunks, 1);
		}
	if (fc->backlog == r)
		fc->backlog = NULL; /* failed with lanes unposted: the comm is done */
	r->magic = BRAID_MAGIC_DEAD;
	braid_pool_put(&fc->reqs, r);
	return res;
}

ncclResult_t ofi_any_test(void *request, int *done, size_t *sizes, int *nsizes)
{
	struct ofi_freq *r = request;

	if (!r->fused)
		return ofi_test(request, done, sizes, nsizes);
	return fused_test(r, done, sizes, nsizes);
}
