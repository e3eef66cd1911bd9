// SPDX-License-Identifier: Apache-2.0
/*
 * A device's shared endpoint (ofi.h): opened with its first lane, with its CQ, its AV
 * (one entry per peer endpoint, shared by the lanes to it) and the announcement buffers
 * every lane's announcements land in; closed by its last lane or at fini, freeing the
 * comms whose last parked lane was on it. Also the registrations of braid's own buffers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_hmem.h"
#include "plugin/clock.h"
#include "plugin/handle.h"
#include "plugin/log.h"

/* ---- the address vector: one entry per peer endpoint, shared by its comms ---- */

static unsigned av_bucket(const uint8_t *name, uint32_t len)
{
	return braid_hash32(name, len) % OFI_AV_BUCKETS;
}

/* A reference to the peer's entry, inserting it on first use; d->lock held. */
int ofi_av_ref(struct ofi_dev *d, const uint8_t *name, uint32_t len, const char *whose,
	       struct ofi_av_entry **out)
{
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
			BRAID_WARN("ofi: %s on %s: fi_av_insert failed: %s", whose, d->name,
				   ofi_strerror(n < 0 ? n : -FI_EINVAL));
			return n < 0 ? n : -EINVAL;
		}
		braid_ctr_add(&d->ctr->av_entries, 1);
		e->next = *head;
		*head = e;
	}
	e->refs++;
	*out = e;
	return 0;
}

int ofi_av_get(struct ofi_lane *l, const uint8_t *name, uint32_t len)
{
	char whose[96];
	int rc;

	snprintf(whose, sizeof(whose), "lane %u, peer %s", l->id, l->comm->peer);
	rc = ofi_av_ref(l->dev, name, len, whose, &l->av);
	if (!rc)
		l->peer_addr = l->av->addr;
	return rc;
}

/* Drop the comm's reference; the last one removes the entry; d->lock held. */
void ofi_av_put(struct ofi_dev *d, struct ofi_av_entry *e)
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

/* ep_lock held. */
static int bind_to_ep(struct ofi_dev *d, struct fid_mr *mr)
{
	int rc;

	if (!mr || !d->mr_endpoint)
		return 0;
	rc = fi_mr_bind(mr, &d->ep->fid, 0);
	if (!rc)
		rc = fi_mr_enable(mr);
	if (rc)
		BRAID_WARN("ofi: binding a registration to the endpoint of %s failed: %s", d->name,
			   ofi_strerror(rc));
	return rc;
}

/* A registration's rc from fi_mr_reg(attr), then bound to the endpoint where the provider
 * asks (FI_MR_ENDPOINT); closed again when either failed. ep_lock held. */
int ofi_mr_bind_or_close(struct ofi_dev *d, int rc, struct fid_mr **mr)
{
	if (!rc)
		rc = bind_to_ep(d, *mr);
	if (rc && *mr) {
		fi_close(&(*mr)->fid);
		*mr = NULL;
	}
	return rc;
}

uint64_t ofi_mr_next_key(struct ofi_dev *d)
{
	return d->mr_prov_key ? 0 : __atomic_fetch_add(&d->next_key, 1, __ATOMIC_RELAXED);
}

/* The shared endpoint must be open (it is once a comm exists). */
int ofi_mr_reg_raw(struct ofi_dev *d, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
		   void **desc)
{
	uint64_t key;
	int rc;

	*mr = NULL;
	*desc = NULL;
	/* the provider takes plain pointers for local buffers; a remote access needs a key */
	if (!d->mr_local && !(access & (FI_REMOTE_READ | FI_REMOTE_WRITE)))
		return 0;
	key = ofi_mr_next_key(d);
	pthread_mutex_lock(&d->ep_lock); /* FI_THREAD_DOMAIN: one libfabric call at a time */
	rc = ofi_mr_bind_or_close(d, fi_mr_reg(d->domain, buf, len, access, 0, key, 0, mr, NULL),
				  mr);
	pthread_mutex_unlock(&d->ep_lock);
	if (rc) {
		BRAID_WARN("ofi: registering %p (%zu bytes) on %s failed: %s", buf, len, d->name,
			   ofi_strerror(rc));
		*mr = NULL;
		return rc;
	}
	*desc = fi_mr_desc(*mr);
	return 0;
}

void ofi_mr_close_raw(struct ofi_dev *d, struct fid_mr *mr)
{
	if (!mr)
		return;
	pthread_mutex_lock(&d->ep_lock);
	fi_close(&mr->fid);
	pthread_mutex_unlock(&d->ep_lock);
}

/* The announcement buffers, registered and posted; ep_lock held. */
static int open_announce_bufs(struct ofi_dev *d)
{
	size_t rx = d->info->rx_attr ? d->info->rx_attr->size : 0;
	int rc;

	/* A share of the provider's receive queue, never all of it: receives need it too. */
	d->rx_cap = rx > UINT32_MAX ? 0 : (uint32_t)rx;
	d->rx_posted = 0;
	d->nann = rx ? (uint32_t)(rx / 8) : 64;
	if (d->nann < 16)
		d->nann = 16;
	if (d->nann > 256)
		d->nann = 256;
	d->ann = calloc(d->nann, sizeof(*d->ann));
	d->ann_unposted = calloc((d->nann + 63) / 64, sizeof(uint64_t));
	d->by_id = calloc(OFI_MAX_COMM_IDS, sizeof(*d->by_id));
	if (!d->ann || !d->ann_unposted || !d->by_id)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->nann; i++) {
		d->ann[i].op.type = OFI_OP_ANNOUNCE_RECV;
		d->ann_unposted[i / 64] |= 1ULL << (i % 64);
	}
	d->ann_nunposted = d->nann;
	if (d->mr_local) {
		uint64_t key = d->mr_prov_key
				       ? 0
				       : __atomic_fetch_add(&d->next_key, 1, __ATOMIC_RELAXED);

		rc = fi_mr_reg(d->domain, d->ann, d->nann * sizeof(*d->ann), FI_RECV, 0, key, 0,
			       &d->ann_mr, NULL);
		if (!rc && d->mr_endpoint) {
			rc = fi_mr_bind(d->ann_mr, &d->ep->fid, 0);
			if (!rc)
				rc = fi_mr_enable(d->ann_mr);
		}
		if (rc)
			return rc;
		d->ann_desc = fi_mr_desc(d->ann_mr);
	}
	return ofi_post_announce_bufs(d);
}

static void close_announce_bufs(struct ofi_dev *d)
{
	if (d->ann_mr)
		fi_close(&d->ann_mr->fid);
	d->ann_mr = NULL;
	d->ann_desc = NULL;
	free(d->ann);
	free(d->ann_unposted);
	free(d->by_id);
	d->ann = NULL;
	d->ann_unposted = NULL;
	d->by_id = NULL;
	d->nann = d->ann_nunposted = 0;
	d->ann_closing = 0;
}

/* Take the announcement buffers back before the endpoint closes (rxm in libfabric 1.17
 * crashes closing an endpoint that holds receives after a peer's connection broke);
 * bounded like a comm's close. ep_lock held. */
static uint32_t cancel_announce_bufs(struct ofi_dev *d)
{
	uint64_t until = braid_now_ns() + OFI_CLOSE_REAP_MS * 1000000ULL;
	uint32_t posted;

	d->ann_closing = 1;
	for (uint32_t i = 0; i < d->nann; i++)
		if (!(d->ann_unposted[i / 64] & (1ULL << (i % 64))))
			fi_cancel(&d->ep->fid, &d->ann[i].op.fictx);
	do {
		posted = d->nann - d->ann_nunposted;
	} while (posted && ofi_dev_progress(d) == 0 && braid_now_ns() < until);
	if (posted)
		BRAID_INFO(NCCL_NET,
			   "ofi: %s: %u of %u announcement buffers still posted %d ms after "
			   "fi_cancel",
			   d->name, posted, d->nann, OFI_CLOSE_REAP_MS);
	return posted;
}

/*
 * An endpoint given up on: operations still on it after the close's reap (sends on a
 * connection whose packets go nowhere, which nothing takes back). rxm in libfabric 1.17
 * crashed in fi_close of such an endpoint: SIGSEGV in 2 of 3 runs of netns-failover's
 * NIC-down-for-good cases, and in CI in its black-hole case (interfaces up, iptables
 * dropping pair 2), where the comms fail and close with sends on the dead path. So on an
 * rxm provider, or a NIC whose interface is down, it is never closed and never read
 * again: its CQ, AV and the announcement buffers the provider may still write stay as
 * they are, here, until the process exits, and the device opens a new endpoint for its
 * next comm. Its sockets and buffers stay with it (an abort that leaves sends behind on
 * tcp;ofi_rxm leaves one endpoint each time). Other providers (shm) close it as before.
 */
struct ofi_abandoned_ep {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *ann_mr;
	void *ann;
	struct ofi_abandoned_ep *next;
};

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER; /* devices close apart */
static struct ofi_abandoned_ep *abandoned; /* reachable to the end: no leak to report */

static int close_may_crash(const struct ofi_dev *d)
{
	return strstr(d->info->fabric_attr->prov_name, "ofi_rxm") ||
	       __atomic_load_n(&d->link_down_ns, __ATOMIC_ACQUIRE);
}

/* ep_lock held. 0, or -ENOMEM (then the caller closes it after all). */
static int abandon_ep(struct ofi_dev *d, int ops, uint32_t anns)
{
	struct ofi_abandoned_ep *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	*a = (struct ofi_abandoned_ep){ .ep = d->ep,
					.cq = d->cq,
					.av = d->av,
					.ann_mr = d->ann_mr,
					.ann = d->ann };
	pthread_mutex_lock(&abandoned_lock);
	a->next = abandoned;
	abandoned = a;
	pthread_mutex_unlock(&abandoned_lock);
	d->cq = NULL;
	d->av = NULL;
	d->ann_mr = NULL;
	d->ann = NULL;
	BRAID_WARN("ofi: %s: its endpoint closes with %d operation(s) of closed comms and %u "
		   "announcement receive(s) the provider never gave back; it is left open, "
		   "unread, until the process exits (closing it crashes tcp;ofi_rxm 1.17), and "
		   "the next comm opens a new one",
		   d->name, ops, anns);
	return 0;
}

void ofi_dev_close_ep(struct ofi_dev *d)
{
	struct ofi_lane *gone = NULL; /* the last parked lane of each comm to free */
	uint32_t anns;
	int left, rc;

	if (!d->ep)
		return;
	pthread_mutex_lock(&d->ep_lock);
	/* Parked lanes' operations once more, within a close's bounds: rxm in libfabric 1.17
	 * can crash closing an endpoint with operations still on it (seen closing comms with
	 * 1 MiB sends in flight under load, tests/conformance abort-close). */
	left = ofi_dev_reap(d, ofi_dev_lanes_left, NULL, 0, &rc);
	if (left)
		BRAID_INFO(NCCL_NET, "ofi: %s: %d operation(s) of closed comms still outstanding",
			   d->name, left);
	anns = d->ann ? cancel_announce_bufs(d) : 0;
	/* The endpoint first: it stops the provider from touching our buffers. */
	if (!(left || anns) || !close_may_crash(d) || abandon_ep(d, left, anns))
		fi_close(&d->ep->fid);
	d->ep = NULL;
	/* Parked lanes are done now; a comm goes when its last parked lane does. Live lanes
	 * (only at fini: NCCL never closed them) stay NCCL's. */
	while (d->lanes) {
		struct ofi_lane *l = d->lanes;

		d->lanes = l->next;
		if (!l->parked)
			continue;
		l->parked = 0;
		if (__atomic_sub_fetch(&l->comm->nparked, 1, __ATOMIC_ACQ_REL) == 0) {
			l->next = gone;
			gone = l;
		}
	}
	d->deferred = NULL;
	memset(d->id_map, 0, sizeof(d->id_map));
	d->nlive = 0;
	close_announce_bufs(d);
	if (d->cq)
		fi_close(&d->cq->fid);
	if (d->av)
		fi_close(&d->av->fid);
	d->cq = NULL;
	d->av = NULL;
	/* the AV is gone, and every entry with it */
	for (int b = 0; b < OFI_AV_BUCKETS; b++)
		while (d->av_tab[b]) {
			struct ofi_av_entry *e = d->av_tab[b];

			d->av_tab[b] = e->next;
			free(e);
		}
	__atomic_store_n(&d->ctr->av_entries, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->ep_lock);
	/* outside ep_lock: releasing takes each lane's */
	while (gone) {
		struct ofi_lane *l = gone;

		gone = l->next;
		ofi_comm_release(l->comm);
	}
	BRAID_INFO(NCCL_NET, "ofi: device %s: endpoint closed", d->name);
}

/* The shared endpoint, its CQ and AV; d->lock and ep_lock held. may_retry: -FI_EBUSY is
 * no news. */
static int open_ep(struct ofi_dev *d, int may_retry)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	/* A hint: one entry per peer endpoint, shared by the comms to it. */
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 256 };
	int rc, shm_off = 0, cuda_api_off = 0;
	const char *step;

	if (d->info->domain_attr->av_type != FI_AV_UNSPEC)
		av_attr.type = d->info->domain_attr->av_type;
	step = "fi_endpoint";
	rc = fi_endpoint(d->domain, d->info, &d->ep, NULL);
	if (rc)
		goto fail;
#if FI_VERSION_GE(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 18))
	if (ofi_hmem_forbid_cuda_api(d->hmem_caps)) {
		bool permitted = false;

		/* NCCL forbids CUDA calls from its network threads; a provider without the
		 * option (-FI_ENOPROTOOPT) does not make them. */
		step = "fi_setopt(FI_OPT_CUDA_API_PERMITTED)";
		rc = fi_setopt(&d->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &permitted,
			       sizeof(permitted));
		if (rc && rc != -FI_ENOPROTOOPT)
			goto fail;
		cuda_api_off = !rc;
	}
#endif
#ifdef BRAID_HAVE_FI_OPT_SHM_PERMITTED /* where libfabric's header has it (the Makefile) */
	if (d->flush) {
		bool permitted = false;

		/* A flush reads our own memory through our own endpoint, and EFA carries a local
		 * peer's traffic through shared memory, which orders nothing on the NIC's PCIe
		 * path (aws-ofi-nccl turns it off for its flush too). A provider without the
		 * option has no such path. */
		step = "fi_setopt(FI_OPT_SHARED_MEMORY_PERMITTED)";
		rc = fi_setopt(&d->ep->fid, FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED,
			       &permitted, sizeof(permitted));
		if (rc && rc != -FI_ENOPROTOOPT && rc != -FI_EOPNOTSUPP)
			goto fail;
		shm_off = !rc;
	}
#endif
	if (d->flush &&
	    !ofi_hmem_self_read_on_nic(d->info->fabric_attr->prov_name, shm_off, cuda_api_off,
				       getenv("FI_EFA_ENABLE_SHM_TRANSFER"))) {
		/* iflush WARNs instead, if NCCL ever asks (ofi_flush.c) */
		d->flush = 0;
		d->flush_unable = 1;
		BRAID_INFO(NCCL_INIT | NCCL_NET,
			   "ofi: %s: a read of its own memory would go through EFA's shared memory "
			   "(this libfabric cannot turn it off here): iflush reads nothing back; "
			   "FI_EFA_ENABLE_SHM_TRANSFER=0 lets it",
			   d->name);
	}
	step = "fi_cq_open";
	rc = fi_cq_open(d->domain, &cq_attr, &d->cq, NULL);
	if (rc)
		goto fail;
	step = "fi_av_open";
	rc = fi_av_open(d->domain, &av_attr, &d->av, NULL);
	if (rc)
		goto fail;
	step = "fi_ep_bind(av)";
	rc = fi_ep_bind(d->ep, &d->av->fid, 0);
	if (rc)
		goto fail;
	step = "fi_ep_bind(cq)";
	rc = fi_ep_bind(d->ep, &d->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc)
		goto fail;
	step = "fi_enable";
	rc = fi_enable(d->ep);
	if (rc)
		goto fail;
	step = "fi_getname";
	d->ep_name_len = sizeof(d->ep_name);
	rc = fi_getname(&d->ep->fid, d->ep_name, &d->ep_name_len);
	if (rc)
		goto fail;
	d->inject_size = d->info->tx_attr->inject_size;
	step = "announcement buffers";
	rc = open_announce_bufs(d);
	if (rc)
		goto fail;
	BRAID_INFO(NCCL_NET,
		   "ofi: device %s: endpoint open, shared by its comms; %u "
		   "announcement buffers",
		   d->name, d->nann);
	return 0;
fail:
	if (rc == -FI_EBUSY && may_retry)
		BRAID_INFO(NCCL_NET, "ofi: %s on device %s: %s; trying again", step, d->name,
			   ofi_strerror(rc));
	else
		BRAID_WARN("ofi: %s on device %s (provider %s) failed: %s", step, d->name,
			   ofi.provider, ofi_strerror(rc));
	if (d->ep)
		fi_close(&d->ep->fid);
	close_announce_bufs(d);
	if (d->cq)
		fi_close(&d->cq->fid);
	if (d->av)
		fi_close(&d->av->fid);
	d->ep = NULL;
	d->cq = NULL;
	d->av = NULL;
	return rc;
}

int ofi_dev_open_ep(struct ofi_dev *d)
{
	int rc = 0;

	/* d->lock keeps other openers out; nothing else uses a domain before it exists */
	if (!d->fabric) {
		rc = ofi_dl.fabric(d->info->fabric_attr, &d->fabric, NULL);
		if (rc)
			BRAID_WARN("ofi: fi_fabric(%s) for device %s failed: %s",
				   d->info->fabric_attr->name, d->name, ofi_strerror(rc));
	}
	if (!rc && !d->domain) {
		rc = fi_domain(d->fabric, d->info, &d->domain, NULL);
		if (rc)
			BRAID_WARN("ofi: fi_domain(%s) failed: %s", d->name, ofi_strerror(rc));
	}
	/* shm refuses (-FI_EBUSY) a region name left by a killed process whose pid is in use
	 * again, and unlinks the stale file as it does: the next try gets through. */
	pthread_mutex_lock(&d->ep_lock);
	for (int tries = 1; !rc && !d->ep; tries++) {
		rc = open_ep(d, tries < 3);
		if (rc == -FI_EBUSY && tries < 3)
			rc = 0;
	}
	pthread_mutex_unlock(&d->ep_lock);
	return rc;
}
