// SPDX-License-Identifier: Apache-2.0
/*
 * listen / connect / accept / close. Set-up runs over plugin/link.c; what net_ib adds is
 * its blob, braid's verbs wire description:
 *
 *   connector (sender)                             listener (receiver)
 *   CQs, QPs to INIT, FIFO registered
 *   HELLO {QPNs, PSNs, FIFO, per NIC: GID,  --->  check; CQs, QPs, receives, RTR, RTS
 *          LID, MTU}
 *                <---------------------------   REPLY {QPNs, PSNs, per NIC: ...}
 *   QPs to RTR, RTS; READY  ----------------->   comm ready
 *
 * A comm on a device of several NICs ("rails") puts QP i on its rail i % nrails, as
 * NCCL's IB transport does on a merged device. The connector pairs each QP with one of
 * the listener's NICs, which its handle lists (ib_subnet.c): the NIC i mod its count,
 * unless BRAID_IB_SUBNET_AWARE_ROUTING finds that one on another subnet. The HELLO names
 * that NIC per QP and the listener puts its QP i there; each side's blob gives each QP's
 * rail, so the sender writes with the key of the peer's rail its QP reaches. The
 * connector picks the QP count: BRAID_IB_QPS_PER_CONN per NIC of its own.
 *
 * The blob carries braid's verbs wire magic, version and exact length, so a peer of
 * another version or another backend gets a clear error.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_ib/ib.h"
#include "net_ib/ib_fo.h"
#include "net_ib/ib_wire.h"
#include "plugin/clock.h"
#include "plugin/comm_limit.h"
#include "plugin/conn.h"
#include "plugin/gpudirect.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/numa.h"
#include "plugin/params.h"

static void comm_free(struct ib_comm *c)
{
	if (!c)
		return;
	if (c->magic == BRAID_MAGIC_SEND || c->magic == BRAID_MAGIC_RECV) {
		struct braid_link_bye bye;

		/* What we did goes to the peer before the QPs go away: it then fails only
		 * what can never complete. */
		ib_comm_bye(c, &bye);
		braid_link_close(c->link, &bye);
		c->link = NULL;
	}
	c->magic = BRAID_MAGIC_DEAD;
	for (int k = 0; k < c->nrails; k++)
		ib_rail_unregister(&c->rails[k]);
	ib_flush_close(c);
	for (int i = 0; i < c->nqps; i++) {
		if (c->qps[i].qp)
			ibv.destroy_qp(c->qps[i].qp);
		if (c->qps[i].ctr)
			__atomic_store_n(&c->qps[i].ctr->in_use, 0, __ATOMIC_RELEASE);
	}
	for (int k = 0; k < c->nrails; k++)
		if (c->rails[k].cq)
			ibv.destroy_cq(c->rails[k].cq);
	ib_fo_free(c);
	if (c->fifo_mr)
		ibv.dereg_mr(c->fifo_mr);
	for (int k = 0; k < BRAID_VDEV_MAX_NICS; k++)
		if (c->ar_mr[k])
			ibv.dereg_mr(c->ar_mr[k]);
	braid_numa_free(c->ar_recs, IB_RING * sizeof(*c->ar_recs));
	braid_numa_free(c->fifo, ib_fifo_bytes(c));
	free(c->qst);
	braid_pool_fini(&c->reqs);
	braid_link_close(c->link, NULL);
	braid_counters_comm_put(c->ctr);
	for (int k = 0; k < c->counted; k++)
		__atomic_sub_fetch(&c->rails[k].dev->ncomms, 1, __ATOMIC_RELAXED);
	free(c);
}

/* A place for the comm on each of its ports, within BRAID_MAX_COMMS and the port's own
 * limit; 0, or -ENOSPC after a WARN (what was taken is given back by comm_free). */
static int comm_count(struct ib_comm *c, const char *peer)
{
	for (int k = 0; k < c->nrails; k++) {
		struct ib_dev *d = c->rails[k].dev;
		int open = __atomic_fetch_add(&d->ncomms, 1, __ATOMIC_RELAXED);

		c->counted = k + 1;
		if (braid_comm_limit_check("ib", d->name, open, ib_dev_comm_limit(d),
					   c->is_send ? "connect to" : "accept from", peer))
			return -ENOSPC;
	}
	return 0;
}

/* Messages above this are cut over the QPs. BRAID_IB_SPLIT_BYTES when set; else
 * NCCL_IB_SPLIT_DATA_ON_QPS when set, with NCCL's meaning (1: every message over all QPs;
 * 0: each on one QP, the QPs in turn); else BRAID_IB_SPLIT_BYTES' default. */
static size_t split_bytes(void)
{
	int64_t nccl = braid_param_int(BRAID_P_IB_SPLIT_DATA_ON_QPS);

	if (nccl < 0 || strcmp(braid_param_source(BRAID_P_IB_SPLIT_BYTES), "default"))
		return (size_t)braid_param_int(BRAID_P_IB_SPLIT_BYTES);
	return nccl ? 0 : SIZE_MAX;
}

/* Adaptive routing when every rail's port has it (NCCL's comm->ar, init.cc); the sender
 * uses it once the peer also offers its records (link_finish). */
static void ar_setup(struct ib_comm *c)
{
	int64_t t = braid_param_int(BRAID_P_IB_AR_THRESHOLD);

	c->ar = 1;
	for (int k = 0; k < c->nrails; k++)
		c->ar = c->ar && c->rails[k].dev->ar;
	c->ar_above = t == -2 ? 8192 : t;
}

/* The adaptive-routing records, registered on every rail (the receiver's for the sender's
 * writes, the sender's for its QPs to read); 0 or -errno. */
static int ar_register(struct ib_comm *c)
{
	int access = IBV_ACCESS_LOCAL_WRITE | (c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE);

	c->ar_recs = braid_numa_alloc(IB_RING * sizeof(*c->ar_recs), c->dev->numa_node);
	if (!c->ar_recs)
		return -ENOMEM;
	for (int k = 0; k < c->nrails; k++) {
		c->ar_mr[k] = ibv.reg_mr(c->rails[k].hca->pd, c->ar_recs,
					 IB_RING * sizeof(*c->ar_recs), access);
		if (!c->ar_mr[k]) {
			int rc = errno ? errno : EIO;

			BRAID_WARN("ib: registering the adaptive-routing records on %s failed: %s",
				   c->rails[k].hca->name, strerror(rc));
			return -rc;
		}
	}
	return 0;
}

static struct ib_comm *comm_new(const struct braid_vdev *vd, struct braid_link *lk, int is_send,
				int *err)
{
	struct ib_comm *c = calloc(1, sizeof(*c));

	*err = -ENOMEM;
	if (!c)
		return NULL;
	c->nrails = vd->n;
	c->is_send = is_send;
	for (int k = 0; k < vd->n; k++) {
		struct ib_rail *rl = &c->rails[k];

		rl->devidx = vd->nic[k];
		rl->dev = &ib.devs[vd->nic[k]];
		rl->hca = rl->dev->hca;
		rl->comm = c;
	}
	*err = comm_count(c, lk->peer);
	if (*err) {
		comm_free(c);
		return NULL;
	}
	c->devidx = c->rails[0].devidx;
	c->dev = c->rails[0].dev;
	c->hca = c->rails[0].hca;
	c->is_send = is_send;
	c->link = lk;
	snprintf(c->peer, sizeof(c->peer), "%s", lk->peer);
	c->traffic_class = (int)braid_param_int(BRAID_P_IB_TC);
	c->sl = (int)braid_param_int(BRAID_P_IB_SL);
	c->split_bytes = split_bytes();
	ar_setup(c);
	return c;
}

/* Flushes are due where NCCL's IB transport enables them (flushEnabled): GPUDirect on the
 * HCA, peer memory or dma-buf, unless NCCL_GDR_FLUSH_DISABLE says no; BRAID_IB_FLUSH=always
 * (a test hook, which flushes host memory too) and never override both. */
static int flush_wanted(const struct ib_comm *c)
{
	int mode = (int)braid_param_int(BRAID_P_IB_FLUSH); /* auto, always, never */

	return mode == 1 || (mode == 0 && (c->hca->gdr_peermem || c->hca->gdr_dmabuf) &&
			     !braid_gdr_nccl_flush_disabled());
}

/* The QPs a connector asks for: BRAID_IB_QPS_PER_CONN per NIC, at least one per NIC. */
static int connector_nqps(const struct ib_comm *c)
{
	int n = c->dev->nqps * c->nrails;

	return n > IB_MAX_QPS ? IB_MAX_QPS : n;
}

/* CQs, QPs (to INIT), request pool; the sender's FIFO. QP i goes on rail rail_of[i], or
 * i % nrails where rail_of is NULL. */
static int comm_build(struct ib_comm *c, int nqps, const uint8_t *rail_of)
{
	uint8_t rail[IB_MAX_QPS];
	struct ib_hca *h = c->hca;
	int per_qp = c->is_send ? ib_sq_depth(c) + 1 : IB_RQ_DEPTH + IB_RECV_SQ_DEPTH;
	int flush = !c->is_send && flush_wanted(c) ? IB_FLUSH_DEPTH : 0;
	int rc;

	if (nqps < c->nrails) {
		/* the peer's QPs cannot reach every NIC of ours: use as many as they do */
		BRAID_INFO(NCCL_NET, "ib: comm with %s uses %d of %d NICs of %s (peer has %d QPs)",
			   c->peer, nqps, c->nrails, c->dev->name, nqps);
		c->nrails = nqps;
	}
	c->nqps = nqps;
	for (int i = 0; i < nqps; i++)
		rail[i] = rail_of ? rail_of[i] : (uint8_t)(i % c->nrails);
	for (int k = 0; k < c->nrails; k++) {
		struct ib_rail *rl = &c->rails[k];
		int mine = 0;

		for (int i = 0; i < nqps; i++)
			mine += rail[i] == k;

		rl->cq = ibv.create_cq(rl->hca->ctx, mine * per_qp + flush + 16, NULL, NULL, 0);
		if (!rl->cq) {
			rc = errno ? errno : EIO;
			BRAID_WARN("ib: ibv_create_cq on %s failed: %s", rl->hca->name,
				   strerror(rc));
			return -rc;
		}
	}
	for (int i = 0; i < nqps; i++) {
		rc = ib_qp_create(c, &c->qps[i], rail[i], c->is_send);
		if (rc)
			return rc;
		c->qpn[i] = c->qps[i].qp->qp_num;
	}
	if (c->ar) {
		rc = ar_register(c);
		if (rc)
			return rc;
	}
	rc = braid_pool_init(&c->reqs, c->is_send ? IB_SEND_REQ_SIZE : sizeof(struct ib_req),
			     c->is_send ? BRAID_MAX_RECVS * IB_RING : 2 * IB_RING, /* + flushes */
			     c->dev->numa_node);
	if (rc)
		return rc;
	if (!c->is_send) {
		/* the FIFO entries of each ring slot, which the receiver's FIFO writes read */
		c->fifo = braid_numa_alloc(ib_fifo_bytes(c), c->dev->numa_node);
		if (!c->fifo)
			return -ENOMEM;
		c->fifo_mr = ibv.reg_mr(h->pd, c->fifo, ib_fifo_bytes(c), IBV_ACCESS_LOCAL_WRITE);
		if (!c->fifo_mr)
			goto reg_fail;
		c->fifo_src_mr = c->fifo_mr;
		for (int i = 0; i < nqps; i++) {
			rc = ib_qp_post_recvs(c, &c->qps[i], IB_RQ_DEPTH);
			if (rc) {
				BRAID_WARN("ib: posting receives on %s:%d failed: %s",
					   c->rails[c->qps[i].rail].dev->name,
					   c->rails[c->qps[i].rail].dev->port, strerror(-rc));
				return rc;
			}
		}
		for (int k = 0; flush && k < c->nrails; k++) {
			rc = ib_flush_open(c, &c->rails[k]);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (c->nrails > 1) {
		struct braid_stripe_cfg cfg;
		int speed[BRAID_VDEV_MAX_NICS];

		braid_stripe_cfg_load(&cfg);
		cfg.batched = 1; /* CQs are read at test() */
		for (int k = 0; k < c->nrails; k++)
			speed[k] = c->rails[k].dev->speed_mbps;
		braid_stripe_init(&c->stripe, c->nrails, speed, &cfg);
		for (int k = 0; k < c->nrails; k++)
			braid_stripe_nic_bytes(&c->stripe, k, &c->rails[k].dev->ctr->t.tx_bytes);
	}
	for (int k = 0; k < c->nrails; k++) {
		struct braid_stripe_cfg cfg;
		int nq = ib_rail_nqps(c, k);

		if (nq < 2 || nq > BRAID_STRIPE_MAX_LANES)
			continue;
		braid_stripe_cfg_qps(&cfg, c->split_bytes, nq);
		/* BRAID_STRIPE=equal: NCCL's even cut, by ib_post.c's chunker alone. Nothing
		 * reads a QP's rate but its weight, so none is measured: equal costs per
		 * message what it did before the QPs were lanes. */
		if (cfg.mode == BRAID_STRIPE_EQUAL)
			continue;
		/* Allocated, not in the comm: 1.3 KiB a rail, and the comm's memory has a
		 * budget (docs/reliability.md, conformance mem) */
		if (!c->qst && !(c->qst = calloc((size_t)c->nrails, sizeof(*c->qst))))
			return -ENOMEM;
		/* QPs of one NIC have no nominal speeds to tell apart: equal until measured */
		braid_stripe_init(&c->qst[k], nq, NULL, &cfg);
		c->qlanes_on |= (uint8_t)(1u << k);
	}
	c->fifo = braid_numa_alloc(ib_fifo_bytes(c), c->dev->numa_node);
	if (!c->fifo)
		return -ENOMEM;
	c->fifo_mr = ibv.reg_mr(h->pd, c->fifo, ib_fifo_bytes(c),
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->fifo_mr)
		goto reg_fail;
	return 0;
reg_fail:
	rc = errno ? errno : EIO;
	BRAID_WARN("ib: registering comm buffers on %s failed: %s", h->name, strerror(rc));
	return -rc;
}

/*
 * The comm's rails join their HCAs' comm lists only once its CQs and QPs exist: the async
 * handler walks those lists (under the HCA lock, from any thread) and reads nqps and the
 * QP and CQ pointers, which nothing orders after a registration made before them.
 */
static int comm_open(struct ib_comm *c, int nqps, const uint8_t *rail_of)
{
	int rc = comm_build(c, nqps, rail_of);

	for (int k = 0; !rc && k < c->nrails; k++)
		ib_rail_register(&c->rails[k]);
	return rc;
}

static void fill_wire(struct ib_comm *c, struct ib_wire *w, const uint32_t *psn)
{
	memset(w, 0, sizeof(*w));
	w->magic = IB_WIRE_MAGIC;
	w->version = IB_WIRE_VERSION;
	w->len = sizeof(*w);
	w->nqps = (uint8_t)c->nqps;
	w->nrails = (uint8_t)c->nrails;
	w->pkey = c->dev->pkey;
	w->tc = (uint8_t)c->traffic_class;
	w->sl = (uint8_t)c->sl;
	for (int k = 0; k < c->nrails; k++) {
		const struct ib_dev *d = c->rails[k].dev;
		struct ib_wire_rail *wr = &w->rails[k];

		wr->link_layer = (uint8_t)d->link_layer;
		wr->mtu = (uint8_t)d->mtu;
		wr->port = (uint8_t)d->port;
		wr->lid = d->lid;
		wr->gid_index = (uint16_t)d->gid_index;
		memcpy(wr->gid, d->gid.raw, 16);
		snprintf(wr->dev, sizeof(wr->dev), "%.39s", d->name);
	}
	if (c->is_send && c->fifo_mr) {
		w->fifo_addr = (uint64_t)(uintptr_t)c->fifo;
		w->fifo_rkey = c->fifo_mr->rkey;
	}
	ib_fo_fill_wire(c, w);
	if (!c->is_send && c->ar_recs) {
		w->ar_addr = (uint64_t)(uintptr_t)c->ar_recs;
		for (int k = 0; k < c->nrails; k++)
			w->ar_rkey[k] = c->ar_mr[k]->rkey;
	}
	for (int i = 0; i < c->nqps; i++) {
		const struct ib_qp *q = &c->qps[i];

		w->qpn[i] = q->qp->qp_num;
		w->psn[i] = psn[i];
		w->qp_rail[i] = q->rail;
		w->qp_peer_rail[i] = c->is_send ? c->want_peer_nic[i] : 0;
		if (q->ece_ok) {
			w->ece_mask |= (uint16_t)(1u << i);
			w->ece[i].vendor_id = q->ece.vendor_id;
			w->ece[i].options = q->ece.options;
			w->ece[i].comp_mask = q->ece.comp_mask;
		}
	}
}

/* 0 when the peer's description is usable; -EPROTO with one WARN otherwise. */
static int check_wire(struct ib_comm *c, const void *payload, uint32_t len, int want_nqps,
		      const char *side)
{
	char why[320];
	int rc = ib_wire_check(payload, len, want_nqps, c->dev, why, sizeof(why));

	if (rc)
		BRAID_WARN("ib: %s %s: %s", side, c->peer, why);
	return rc;
}

static int connect_qps(struct ib_comm *c, const struct ib_wire *w, const uint32_t *lpsn)
{
	struct braid_ctr_region *r = braid_counters();
	union ibv_gid rgid;

	memcpy(rgid.raw, w->rails[0].gid, 16);
	ib_gid_str(&rgid, c->peer_gid, sizeof(c->peer_gid));
	/* The receive side's QPs go in the class and level of the send side (NCCL's remMeta->tc
	 * and ->sl), which a comm's own trafficClass (v10+) may have set. */
	if (!c->is_send) {
		c->traffic_class = w->tc;
		c->sl = w->sl;
	}
	for (int i = 0; i < c->nqps; i++) {
		struct ib_qp *qp = &c->qps[i];
		const struct ib_wire_rail *pr = &w->rails[w->qp_rail[i]];
		const struct ib_dev *d = c->rails[qp->rail].dev;
		enum ibv_mtu mtu = (enum ibv_mtu)(pr->mtu < d->mtu ? pr->mtu : d->mtu);
		struct ibv_ece ece = { w->ece[i].vendor_id, w->ece[i].options,
				       w->ece[i].comp_mask };
		int rc;

		qp->peer_rail = w->qp_rail[i];
		memcpy(rgid.raw, pr->gid, 16);
		rc = ib_qp_take_ece(c, qp, (w->ece_mask & (1u << i)) ? &ece : NULL);
		if (rc)
			return rc;
		rc = ib_qp_connect(c, qp, i, w->qpn[i], w->psn[i], lpsn[i], &rgid, pr->lid, mtu);
		c->qpath[i] = (struct ib_qp_path){ .gid = rgid, .lid = pr->lid, .mtu = mtu };

		if (rc)
			return rc;
		/* a per-QP counter record, when one is free */
		for (int k = 0; r && k < BRAID_CTR_MAX_QPS; k++) {
			struct braid_ctr_qp *q = &r->qps[k];
			uint32_t expect = 0;

			if (!__atomic_compare_exchange_n(&q->in_use, &expect, 1, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				continue;
			memset((char *)q + sizeof(q->in_use), 0, sizeof(*q) - sizeof(q->in_use));
			q->dev = c->rails[qp->rail].devidx;
			q->comm = -1;
			q->qpn = c->qps[i].qp->qp_num;
			q->remote_qpn = w->qpn[i];
			q->flow_label = c->qps[i].flow_label;
			q->sport = c->qps[i].sport;
			c->qps[i].ctr = q;
			break;
		}
	}
	ib_rj_attach(c);
	return 0;
}

static void log_ready(struct ib_comm *c)
{
	char labels[IB_MAX_QPS * 64] = "";
	size_t used = 0;

	for (int i = 0; i < c->nqps && used < sizeof(labels); i++)
		used += (size_t)snprintf(labels + used, sizeof(labels) - used,
					 "%s%#x->%#x fl %#x sport %u ece %#x", i ? ", " : "",
					 c->qps[i].qp->qp_num, c->qps[i].remote_qpn,
					 c->qps[i].flow_label, c->qps[i].sport,
					 c->qps[i].ece_ok ? c->qps[i].ece.options : 0);
	BRAID_INFO(NCCL_NET, "ib: %s comm %s %s on %s:%d%s ready, peer GID %s, %d QP(s): %s",
		   c->is_send ? "send" : "receive", c->is_send ? "to" : "from", c->peer,
		   c->dev->name, c->dev->port, c->nrails > 1 ? " and more NICs" : "", c->peer_gid,
		   c->nqps, labels);
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

static int link_hello(void *comm, void *blob, uint32_t *len)
{
	struct ib_comm *c = to_ib_comm(comm);

	fill_wire(c, blob, c->psn);
	*len = sizeof(struct ib_wire);
	return 0;
}

static int link_finish(void *comm, const void *blob, uint32_t len)
{
	struct ib_comm *c = to_ib_comm(comm);
	const struct ib_wire *w = blob;
	int rc = check_wire(c, blob, len, c->nqps, "connect to");

	if (rc)
		return rc;
	if (c->ar && !w->ar_addr)
		BRAID_INFO(NCCL_NET,
			   "ib: send comm to %s posts without adaptive routing: the "
			   "peer's ports have it off (BRAID_IB_ADAPTIVE_ROUTING)",
			   c->peer);
	c->ar = c->ar && w->ar_addr;
	if (!c->ar)
		c->ar_above = INT64_MAX;
	c->rem_ar_addr = w->ar_addr;
	memcpy(c->rem_ar_rkey, w->ar_rkey, sizeof(c->rem_ar_rkey));
	ib_fo_take_wire(c, w);
	return connect_qps(c, blob, c->psn);
}

/* The HELLO's pairing names NICs of ours: 0, or -EPROTO with the reason in why. */
static int hello_nics_check(const struct ib_wire *hello, const struct braid_vdev *vd, char *why,
			    size_t whylen)
{
	for (int i = 0; i < hello->nqps; i++) {
		if (hello->qp_peer_rail[i] < vd->n)
			continue;
		snprintf(why, whylen, "its QP %d goes to our NIC %u, of %d", i,
			 hello->qp_peer_rail[i], vd->n);
		return -EPROTO;
	}
	return 0;
}

static int link_answer(void *listen_comm, struct braid_link *lk, const void *blob, uint32_t len,
		       void *reply, uint32_t *rlen, void **comm)
{
	const struct braid_vdev *lvd = &to_listen_comm(listen_comm)->vdev;
	const struct ib_wire *hello = blob;
	struct braid_vdev use;
	uint8_t rail_of[IB_MAX_QPS];
	uint32_t psn[IB_MAX_QPS];
	struct ib_comm *c;
	char why[320];
	int rc = ib_wire_check(blob, len, 0, &ib.devs[lvd->nic[0]], why, sizeof(why));

	if (!rc)
		rc = hello_nics_check(hello, lvd, why, sizeof(why));
	if (rc) {
		BRAID_WARN("ib: accept from %s: %s", lk->peer, why);
		return rc; /* lk is still the listener's, which drops it */
	}
	/* our NICs in the order the peer's QPs reach them: QP 0's, which carries the FIFO
	 * writes, is the comm's first */
	ib_subnet_listener_rails(lvd, hello, lk->peer, &use, rail_of);
	c = comm_new(&use, lk, 0, &rc);
	if (!c)
		return rc;
	c->rem_fifo_addr = hello->fifo_addr;
	c->rem_fifo_rkey = hello->fifo_rkey;
	rc = comm_open(c, hello->nqps, rail_of);
	if (!rc) {
		ib_fo_take_wire(c, hello);
		rc = ib_fo_build(c);
	}
	if (!rc) {
		make_psns(psn, c->nqps);
		rc = connect_qps(c, hello, psn);
	}
	if (rc) {
		c->link = NULL; /* still the listener's, which drops it */
		comm_free(c);
		return rc;
	}
	fill_wire(c, reply, psn);
	*rlen = sizeof(struct ib_wire);
	*comm = c;
	return 0;
}

static void link_discard(void *comm)
{
	comm_free(to_ib_comm(comm));
}

static const struct braid_link_ops ib_link_ops = {
	.who = "ib",
	.kind = BRAID_BACKEND_IB,
	.hello = link_hello,
	.finish = link_finish,
	.answer = link_answer,
	.discard = link_discard,
	.handle_nics = ib_subnet_fill_handle, /* the NICs' networks and ports (ib_subnet.c) */
};

ncclResult_t ib_listen(const struct braid_vdev *vd, void *handle, void **listen_comm)
{
	return braid_listen_comm_open(&ib_link_ops, vd, handle, ib.devs[vd->nic[0]].ctr,
				      listen_comm);
}

/* A comm is ready: its counters, and the QPs' records name it. */
static void comm_ready(struct ib_comm *c, int is_send)
{
	c->ctr = braid_counters_comm_get(c->devidx,
					 is_send ? BRAID_CTR_COMM_SEND : BRAID_CTR_COMM_RECV,
					 c->peer);
	c->ctr->nlanes = (uint32_t)c->nrails;
	for (int k = 0; k < c->nrails && k < BRAID_CTR_MAX_LANES; k++) {
		c->rails[k].ctr = &c->ctr->lanes[k];
		c->rails[k].ctr->dev = c->rails[k].devidx;
		c->rails[k].ctr->weight_ppm = (uint32_t)(1000000 / c->nrails);
	}
	for (int i = 0; i < c->nqps; i++)
		if (c->qps[i].ctr)
			c->qps[i].ctr->comm = ctr_index(c->ctr);
	c->magic = is_send ? BRAID_MAGIC_SEND : BRAID_MAGIC_RECV;
	log_ready(c);
}

/* The connector's comm: its QPs exist (the REPLY's blob carries their numbers). */
static void *ib_conn_create(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			    struct braid_link *lk, int *rc)
{
	struct braid_vdev use;
	struct ib_comm *c;

	*rc = ib_subnet_pick_rails(vd, lk, &use);
	if (*rc)
		return NULL;
	c = comm_new(&use, lk, 1, rc);
	if (!c)
		return NULL;
	if (opts->traffic_class != NCCL_NET_TRAFFIC_CLASS_UNDEF)
		c->traffic_class = opts->traffic_class & 0xff;
	*rc = comm_open(c, connector_nqps(c), NULL);
	if (!*rc) {
		c->fo = 1; /* offered, when it applies (ib_fo_build) */
		*rc = ib_fo_build(c);
	}
	if (*rc) {
		c->link = NULL; /* the driver closes it */
		comm_free(c);
		return NULL;
	}
	ib_subnet_pair_qps(c, lk, c->want_peer_nic);
	make_psns(c->psn, c->nqps);
	return c;
}

static struct braid_link *ib_conn_link(void *comm)
{
	return to_ib_comm(comm)->link;
}

static void ib_conn_ready(void *comm, int is_send)
{
	comm_ready(to_ib_comm(comm), is_send);
}

static void ib_conn_destroy(void *comm)
{
	comm_free(to_ib_comm(comm));
}

static const struct braid_conn_ops ib_conn_ops = {
	.link = &ib_link_ops,
	.create = ib_conn_create,
	.link_of = ib_conn_link,
	.ready = ib_conn_ready,
	.destroy = ib_conn_destroy,
};

ncclResult_t ib_connect(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			void *handle, void **send_comm)
{
	return braid_conn_connect(&ib_conn_ops, vd, opts, handle, send_comm);
}

ncclResult_t ib_accept(void *listen_comm, void **recv_comm)
{
	return braid_conn_accept(&ib_conn_ops, listen_comm, recv_comm);
}

ncclResult_t ib_close_send(void *send_comm)
{
	comm_free(to_ib_comm(send_comm));
	return ncclSuccess;
}

ncclResult_t ib_close_recv(void *recv_comm)
{
	comm_free(to_ib_comm(recv_comm));
	return ncclSuccess;
}

ncclResult_t ib_close_listen(void *listen_comm)
{
	return braid_listen_comm_close(&ib_link_ops, listen_comm);
}
