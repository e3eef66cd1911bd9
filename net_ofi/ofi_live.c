// SPDX-License-Identifier: Apache-2.0
/*
 * Which NICs of a fused device a new comm uses: those whose interface is up on both sides
 * (issue 19, a NIC down before connect). Lane k of a comm pairs with the peer's lane k,
 * so both sides must leave out the same NICs: the listener marks its down NICs in the
 * handle (struct braid_handle nic_down), the connector leaves out each NIC that is down
 * on either side and names the NICs it kept in its HELLO (struct ofi_blob_head used),
 * and the listener builds its comm on exactly those. A NIC left out gets a WARN on each
 * side; with every NIC down the comm forms on all of them, as before.
 *
 * "Down": the interface named like the libfabric domain (tcp;ofi_rxm and the sockets
 * providers name domains after interfaces) is not IFF_UP or has no carrier
 * (IFF_RUNNING; a veth whose peer went down loses it), or is gone (deleted; one
 * re-created under the same name is read again), by name, in the calling thread's network
 * namespace. A domain that was no interface at init (EFA's rdmap*, shm) is never down
 * here.
 *
 * Under a live comm (ofi_live_watch): tcp;ofi_rxm sets no timeout of its own, and TCP
 * retransmits into a downed interface for about 15 min (tcp_retries2), so a comm on it
 * would stall without a word. A waiting comm looks at the NICs of what it waits for
 * instead (never a call that completes at once: the look runs where a request waits, at
 * most once per BRAID_LIVENESS_MS), and one down for BRAID_OFI_DOWN_TIMEOUT_MS fails the
 * comm, naming it. A fused comm routes around a NIC that is down (ofi_live_recv_lanes):
 * its receiver leaves the lane out of the groups it posts from then on, so an idle comm
 * carries on over its other NICs and takes the NIC back once it is up on both sides; what
 * was already on the NIC is not moved (net_ib does: docs/ib.md, "Failover"; the plan for
 * net_ofi: docs/design/ofi-failover.md) and waits for it, within the bound. A path
 * that carries nothing while its interfaces stay up fails a fused comm too (its other
 * NICs deliver: ofi_live_parts, ofi_live_announce); on a one-NIC comm it is only named
 * (ofi_live_send_waits).
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/clock.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/params.h"

int ofi_dev_link_down(const struct ofi_dev *d)
{
	struct ifreq ifr;
	int fd, down = 0;

	if (!d->is_iface || strlen(d->name) >= sizeof(ifr.ifr_name))
		return 0;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) /* no fd to ask with (EMFILE): no news, which is not "down" */
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, d->name, strlen(d->name));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		down = !(ifr.ifr_flags & IFF_UP) || !(ifr.ifr_flags & IFF_RUNNING);
	else /* gone (a veth deleted, its namespace too): down while it is */
		down = errno == ENODEV;
	close(fd);
	return down;
}

void ofi_live_fill_handle(const struct braid_vdev *vd, struct braid_handle *h)
{
	h->nnics = (uint8_t)vd->n;
	h->nic_down = 0;
	for (int k = 0; k < vd->n; k++)
		if (ofi_dev_link_down(&ofi.devs[vd->nic[k]]))
			h->nic_down |= (uint8_t)(1u << k);
}

static void subset(const struct braid_vdev *vd, uint32_t used, struct braid_vdev *use)
{
	use->n = 0;
	for (int k = 0; k < vd->n; k++)
		if (used >> k & 1)
			use->nic[use->n++] = vd->nic[k];
}

uint32_t ofi_live_pick(const struct braid_vdev *vd, const struct braid_link *lk,
		       struct braid_vdev *use)
{
	uint32_t all = (1u << vd->n) - 1, used = 0, ours = 0;
	int nused;

	for (int k = 0; k < vd->n; k++) {
		int mine = ofi_dev_link_down(&ofi.devs[vd->nic[k]]);
		int theirs = k < lk->peer_nnics && (lk->peer_nic_down >> k & 1);

		ours |= (uint32_t)mine << k;
		if (!mine && !theirs)
			used |= 1u << k;
	}
	if (!used) {
		*use = *vd;
		return all;
	}
	subset(vd, used, use);
	nused = use->n;
	for (int k = 0; k < vd->n; k++)
		if (!(used >> k & 1))
			BRAID_WARN("ofi: connect to %s: NIC %s (lane %d) left out of the comm, which "
				   "runs on %d of the device's %d NICs: %s",
				   lk->peer, ofi.devs[vd->nic[k]].name, k, nused, vd->n,
				   ours >> k & 1 ? "its interface is down"
						 : "the peer's NIC on that lane is down");
	return used;
}

int ofi_live_take(const struct braid_vdev *vd, uint32_t used, const char *peer,
		  struct braid_vdev *use)
{
	if (!used || used >> vd->n)
		return -EPROTO;
	subset(vd, used, use);
	for (int k = 0; k < vd->n; k++)
		if (!(used >> k & 1))
			BRAID_WARN("ofi: accept from %s: NIC %s (lane %d) left out of the comm, which "
				   "runs on %d of the device's %d NICs: %s",
				   peer, ofi.devs[vd->nic[k]].name, k, use->n, vd->n,
				   ofi_dev_link_down(&ofi.devs[vd->nic[k]])
					   ? "its interface is down"
					   : "the peer's NIC on that lane is down");
	return 0;
}

/* Read d's interface and take in a change: the device's down mark, its counter (braid stat
 * shows the NIC down) and a WARN at each edge. An outage is timed from the first read
 * that saw it after a read that did not, or after a gap of reads (no comm waited on the
 * device for a while: it may have been up meanwhile). d->lock held. */
static void dev_link_read(struct ofi_dev *d, uint64_t now, uint64_t period_ns)
{
	uint64_t since = __atomic_load_n(&d->link_down_ns, __ATOMIC_RELAXED);
	uint64_t last = __atomic_load_n(&d->link_read_ns, __ATOMIC_RELAXED);
	int down = ofi_dev_link_down(d);

	__atomic_store_n(&d->link_read_ns, now, __ATOMIC_RELAXED);
	if (down && since && now - last > 2 * period_ns) {
		__atomic_store_n(&d->link_down_ns, now, __ATOMIC_RELEASE);
		return;
	}
	if (down == (since != 0))
		return;
	__atomic_store_n(&d->link_down_ns, down ? now : 0, __ATOMIC_RELEASE);
	if (d->ctr)
		__atomic_store_n(&d->ctr->port_down, (uint32_t)down, __ATOMIC_RELAXED);
	if (down)
		BRAID_WARN("ofi: NIC %s: its interface went down (not up, no carrier, or gone) under a "
			   "live comm; what its comms have on it waits until it is back, and fails "
			   "them once it has been down for %lld ms (BRAID_OFI_DOWN_TIMEOUT_MS); "
			   "fused comms leave it out of their new receives",
			   d->name, (long long)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS));
	else
		BRAID_WARN("ofi: NIC %s: its interface is up again after %.1f s down", d->name,
			   (double)(now - since) / 1e9);
}

/* Read within two periods of now, or after now (another thread's clock ran ahead). */
static int dev_read_lately(const struct ofi_dev *d, uint64_t now, uint64_t period_ns)
{
	uint64_t read = __atomic_load_n(&d->link_read_ns, __ATOMIC_RELAXED);

	return now <= read || now - read <= 2 * period_ns;
}

/* Since when d's interface has been down (0: up, or not known: not read lately), read
 * again when the last read is older than BRAID_LIVENESS_MS. Comms on several threads ask:
 * one reads, the others take its answer; one that finds the lock taken (by that reader, or
 * by registration or set-up) takes the last answer only if it is recent. */
static uint64_t dev_down_since(struct ofi_dev *d, uint64_t now, uint64_t period_ns)
{
	if (now >= __atomic_load_n(&d->link_next_ns, __ATOMIC_RELAXED) &&
	    pthread_mutex_trylock(&d->lock) == 0) {
		if (now >= __atomic_load_n(&d->link_next_ns, __ATOMIC_RELAXED)) {
			__atomic_store_n(&d->link_next_ns, now + period_ns, __ATOMIC_RELAXED);
			dev_link_read(d, now, period_ns);
		}
		pthread_mutex_unlock(&d->lock);
	}
	if (!dev_read_lately(d, now, period_ns))
		return 0;
	return __atomic_load_n(&d->link_down_ns, __ATOMIC_ACQUIRE);
}

static uint64_t liveness_ns(void)
{
	return (uint64_t)braid_param_int(BRAID_P_LIVENESS_MS) * 1000000ULL;
}

int ofi_live_watch(struct ofi_comm *c, uint64_t now, uint32_t wait)
{
	uint64_t period = liveness_ns();
	long long bound_ms = braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS);

	c->live_next_ns = now + period;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_dev *d = c->lane[k].dev;
		uint64_t since = wait >> k & 1 ? dev_down_since(d, now, period) : 0;
		uint64_t down = since && now > since ? now - since : 0;

		if (down < (uint64_t)bound_ms * 1000000ULL)
			continue;
		BRAID_WARN("ofi: %s comm %s %s: NIC %s (lane %d of %d) failed: its interface has "
			   "been down for %.1f s (BRAID_OFI_DOWN_TIMEOUT_MS=%lld); the comm fails "
			   "with %d request(s) in flight%s",
			   ofi_comm_kind(c), c->is_send ? "to" : "from", c->peer, d->name, k,
			   c->nlanes, (double)down / 1e9, bound_ms, c->inflight,
			   c->nlanes > 1 ? " (net_ofi does not move what was sent on a NIC to the "
					   "comm's other NICs yet)"
					 : "");
		return -1;
	}
	return 0;
}

/* The first lane of a comm not in `in` (a mask) when another lane is, among those whose
 * interface is not seen down (that has its own bound and WARN, ofi_live_watch); -1 if
 * none. */
static int late_lane(const struct ofi_comm *c, uint32_t in)
{
	for (int k = 0; in && k < c->nlanes; k++)
		if (!(in >> k & 1) &&
		    !__atomic_load_n(&c->lane[k].dev->link_down_ns, __ATOMIC_ACQUIRE))
			return k;
	return -1;
}

/* Whether a split first seen at *since_ns (set now if 0) is past the bound. */
static int split_too_long(uint64_t *since_ns, uint64_t now)
{
	if (!*since_ns) {
		*since_ns = now;
		return 0;
	}
	return now - *since_ns >=
	       (uint64_t)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS) * 1000000ULL;
}

/* The lanes of the group of receive r with a part of some buffer posted on them. A lane
 * whose parts moved (ofi_move.c) carries nothing any more; the lane each moved part went
 * to does, in flight or landed (it delivered, and says the sender sent). */
static uint32_t recv_carriers(const struct ofi_comm *c, struct ofi_req *r)
{
	const struct ofi_recv_part *recv = ofi_req_recv(r);
	uint32_t carry = 0, via = 0;

	for (int k = 0; k < c->nlanes; k++)
		for (int i = 0; (r->lanes >> k & 1) && i < r->n; i++) {
			if (!(recv->rl[k].ann.e[i].flags & OFI_PART_POSTED))
				continue;
			carry |= 1u << k;
			if (r->moved >> k & 1)
				via |= 1u << recv->rl[k].op[i].lane;
			else
				break;
		}
	return (carry & ~(uint32_t)r->moved) | via;
}

/*
 * A path that drops everything while both interfaces stay up (a black hole in the fabric)
 * fails no TCP connection for about 15 min either. The receiver tells it: the sender posts
 * every lane's part of a message at once, so once one lane's part is in, the others were
 * sent too; one still out after the bound, while this process keeps testing, sits on a
 * path that carries nothing. (The sender cannot tell: an eager part completes once it is
 * in the socket, and a rendezvous part waits for the receiver's progress.)
 */
int ofi_live_parts(struct ofi_comm *c, struct ofi_req *r, uint32_t done, uint64_t now)
{
	long long bound_ms = braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS);
	uint32_t carry = recv_carriers(c, r);
	int k;

	/* Only lanes with a part posted deliver anything: a lane with none of the group
	 * (a small message went whole to another, or the group leaves it out) is done at
	 * once, before the sender sent anything, and says nothing of the others' paths. */
	k = (done & carry) ? late_lane(c, done | ~carry) : -1;

	if (k < 0 || !split_too_long(&r->split_ns, now))
		return 0;
	BRAID_WARN("ofi: receive comm from %s: NIC %s (lane %d of %d) failed: buffer %llu's "
		   "part on it is still out %.1f s after the comm's other NIC(s) delivered "
		   "theirs (BRAID_OFI_DOWN_TIMEOUT_MS=%lld): its path carries nothing, though "
		   "the interface is up; the comm fails with %d request(s) in flight (net_ofi "
		   "does not move a NIC's traffic to the comm's other NICs yet)",
		   c->peer, c->lane[k].dev->name, k, c->nlanes, (unsigned long long)r->first,
		   (double)(now - r->split_ns) / 1e9, bound_ms, c->inflight);
	return -1;
}

/* The receiver sends every lane's announcement of a group at once, so the same holds for
 * a sender waiting on one: announced on one lane and not on another, past the bound, with
 * nothing at all completing on the other lane's NIC meanwhile (from any comm), that NIC's
 * path carries nothing. It catches the black hole where no message is in flight yet,
 * which the receiver cannot see (none of its parts is in). */
const struct ofi_group *ofi_send_group(const struct ofi_comm *c, uint32_t *want, uint32_t *in)
{
	uint32_t slot = c->seq % OFI_MAX_INFLIGHT;
	const struct ofi_group *g = NULL;

	*in = 0;
	for (int k = 0; k < c->nlanes; k++) {
		const struct ofi_group *gk = &c->lane[k].ring[slot];

		if (__atomic_load_n(&gk->arrived, __ATOMIC_ACQUIRE)) {
			*in |= 1u << k;
			g = g ? g : gk;
		}
	}
	*want = g && OFI_KIND_LANES(g->ann.kind) ? OFI_KIND_LANES(g->ann.kind) : ofi_all_lanes(c);
	return g;
}

int ofi_live_announce(struct ofi_comm *c, uint64_t now)
{
	uint32_t in, want;
	uint64_t comp;
	int k;

	/* the lanes the group leaves out count as in */
	k = ofi_send_group(c, &want, &in) ? late_lane(c, in | ~want) : -1;
	if (k < 0) {
		c->ann_split_ns = 0;
		return 0;
	}
	comp = __atomic_load_n(&c->lane[k].dev->completions, __ATOMIC_RELAXED);
	if (c->ann_split_seq != c->seq || comp != c->ann_split_comp) {
		/* a new split, or the late NIC moved something: a receiver whose queue on
		 * that NIC is full (its receives for other comms fill it) holds the
		 * announcement back too, and that is no dead path */
		c->ann_split_ns = 0;
		c->ann_split_seq = c->seq;
		c->ann_split_comp = comp;
	}
	if (!split_too_long(&c->ann_split_ns, now))
		return 0;
	BRAID_WARN("ofi: send comm to %s: NIC %s (lane %d of %d) failed: the receiver's "
		   "announcement of its next buffers is still out on it %.1f s after it came "
		   "on the comm's other NIC(s), and nothing came over it meanwhile "
		   "(BRAID_OFI_DOWN_TIMEOUT_MS=%lld): its path carries nothing, though the "
		   "interface is up; the comm fails with %d "
		   "request(s) in flight (net_ofi does not move a NIC's traffic to the comm's "
		   "other NICs yet)",
		   c->peer, c->lane[k].dev->name, k, c->nlanes,
		   (double)(now - c->ann_split_ns) / 1e9,
		   (long long)braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS), c->inflight);
	return -1;
}

/*
 * A send that waits for the bound names its NIC(s), once per comm: it went out only
 * after the receiver had announced its buffer, so the receiver was in the collective and
 * progressing; an eager part completes once it is in the socket, a rendezvous part as
 * soon as the receiver pulls it. Still waiting after the bound, the path drops everything
 * (a black hole: on a one-NIC comm nothing else sees it, and TCP retransmits for about
 * 15 min before tcp;ofi_rxm fails the send), or the peer process stopped (a debugger,
 * SIGSTOP), or it starves for CPU. The comm is not failed for it: a stopped peer may go on.
 */
void ofi_live_send_waits(struct ofi_comm *c, const struct ofi_req *r, uint32_t done, uint64_t now)
{
	long long bound_ms = braid_param_int(BRAID_P_OFI_DOWN_TIMEOUT_MS);
	uint64_t bound_ns = (uint64_t)bound_ms * 1000000ULL, last;
	struct ofi_dev *d;
	char nics[160];
	size_t len = 0;
	int warn;

	if (c->send_wait_warned || !r->waiting_ns || now - r->waiting_ns < bound_ns)
		return;
	c->send_wait_warned = 1;
	/* every comm over the path sees it: one WARN per NIC and bound, the rest at INFO */
	d = c->lane[0].dev;
	last = __atomic_load_n(&d->send_wait_ns, __ATOMIC_RELAXED);
	warn = (!last || now - last >= bound_ns) &&
	       __atomic_compare_exchange_n(&d->send_wait_ns, &last, now, 0, __ATOMIC_RELAXED,
					   __ATOMIC_RELAXED);
	nics[0] = '\0';
	for (int k = 0; k < c->nlanes && len < sizeof(nics); k++)
		if (r->slen[k] && !(done >> k & 1))
			len += (size_t)snprintf(nics + len, sizeof(nics) - len, "%s%s (lane %d)",
						len ? ", " : "", c->lane[k].dev->name, k);
	braid_log(warn ? BRAID_LOG_WARN : BRAID_LOG_INFO, NCCL_NET, __FILE__, __LINE__,
		  "ofi: send comm to %s: a send of %zu bytes (buffer %llu) has waited %.1f s "
		  "on NIC %s although the receiver had announced its buffer, and %d request(s) "
		  "are in flight (BRAID_OFI_DOWN_TIMEOUT_MS=%lld): the path to the peer may drop "
		  "everything, or the peer process is stopped or starved; the comm keeps "
		  "waiting (on tcp;ofi_rxm, TCP gives up after about 15 min and the send then "
		  "fails). `braid stat` counts it as a stall; check the path.",
		  c->peer, r->ssize, (unsigned long long)r->first,
		  (double)(now - r->waiting_ns) / 1e9, len ? nics : c->lane[0].dev->name,
		  c->inflight, bound_ms);
}

/* ---- lanes in and out of new groups (fused comms) ---- */

/*
 * The lanes of c whose NIC reads down now. A NIC not read lately whose reader is busy
 * (dev_down_since's "not known") keeps its bit of `was`, the comm's last answer: read as
 * up on no news, a fused receiver took a NIC down for seconds back into a group, whose
 * part there then failed the comm at once (netns-failover cases 9 and 10 under ASan).
 */
static uint32_t lanes_down(struct ofi_comm *c, uint64_t now, uint32_t was)
{
	uint64_t period = liveness_ns();
	uint32_t down = 0;

	c->lanes_next_ns = now + period;
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_dev *d = c->lane[k].dev;

		if (dev_down_since(d, now, period))
			down |= 1u << k;
		else if (!dev_read_lately(d, now, period))
			down |= was & 1u << k;
	}
	return down;
}

/* What the sender tells the receiver over the link: its lanes whose NIC is down. */
#define OFI_LANES_MAGIC 0x6f666c64u /* "ofld" */
struct ofi_lanes_msg {
	uint32_t magic;
	uint32_t down;
};

/* `braid stat`'s failovers and recoveries of the comm and its lanes: a lane whose NIC
 * went down on this side or (receive comms) on the sender's, as the comm last looked, and
 * came back. The lane reads down meanwhile, also where its own NIC is up. */
static void lanes_count(struct ofi_comm *c, uint32_t down)
{
	uint32_t moved = down ^ c->ctr_down;

	c->ctr_down = down;
	for (int k = 0; c->ctr && moved && k < c->nlanes; k++) {
		uint32_t *n;

		if (!(moved >> k & 1))
			continue;
		n = down >> k & 1 ? &c->ctr->failovers : &c->ctr->recoveries;
		__atomic_store_n(n, *n + 1, __ATOMIC_RELAXED);
		if (k >= BRAID_CTR_MAX_LANES)
			continue;
		n = down >> k & 1 ? &c->ctr->lanes[k].failovers : &c->ctr->lanes[k].recoveries;
		__atomic_store_n(n, *n + 1, __ATOMIC_RELAXED);
	}
}

void ofi_live_recv_lanes(struct ofi_comm *c)
{
	ofi_live_recv_lanes_at(c, braid_now_ns());
}

void ofi_live_recv_lanes_at(struct ofi_comm *c, uint64_t now)
{
	uint32_t all = ofi_all_lanes(c), mine, out, moved;

	if (now < c->lanes_next_ns)
		return;
	mine = lanes_down(c, now, c->lanes_out);
	out = (mine | c->peer_down) & all;
	lanes_count(c, out);
	if (out == all) /* nothing to move to: every lane stays, and the bound decides */
		out = 0;
	moved = out ^ c->lanes_out;
	if (moved & ~out) /* a lane back: its weight 0 until followed again (ofi_stripe.c) */
		c->weights_cut = 0;
	c->lanes_out = out;
	c->lanes_in = all & ~out;
	c->ann_kind = OFI_MSG_ANNOUNCE | (out ? c->lanes_in << 8 : 0);
	for (int k = 0; moved && k < c->nlanes; k++) {
		if (!(moved >> k & 1))
			continue;
		braid_stripe_lane_down(&c->stripe, k, out >> k & 1);
		if (out >> k & 1) {
			BRAID_INFO(NCCL_NET,
				   "ofi: receive comm from %s: NIC %s (lane %d of %d) left out of new "
				   "receives: %s; they go over the comm's other NIC(s), and parts "
				   "already on it wait for it (BRAID_OFI_DOWN_TIMEOUT_MS)",
				   c->peer, c->lane[k].dev->name, k, c->nlanes,
				   mine >> k & 1 ? "its interface is down"
						 : "the sender's NIC on that lane is down");
			continue;
		}
		c->move_warned &= ~(1u << k); /* its next move WARNs again */
		BRAID_INFO(NCCL_NET,
			   "ofi: receive comm from %s: NIC %s (lane %d of %d) back in new receives",
			   c->peer, c->lane[k].dev->name, k, c->nlanes);
	}
}

void ofi_live_send_lanes(struct ofi_comm *c, uint64_t now)
{
	struct ofi_lanes_msg m = { .magic = OFI_LANES_MAGIC };
	int rc;

	if (now < c->lanes_next_ns)
		return;
	m.down = lanes_down(c, now, c->told_down);
	if (m.down == c->told_down)
		return;
	rc = braid_link_send(c->link, &m, sizeof(m));
	if (rc) {
		BRAID_INFO(NCCL_NET, "ofi: send comm to %s: telling it which NICs are down: %s",
			   c->peer, strerror(-rc));
		return; /* again at the next look */
	}
	lanes_count(c, m.down);
	c->told_down = m.down;
	c->move_warned &= m.down; /* a lane back WARNs again at its next move */
}

int ofi_live_take_word(struct ofi_comm *c, const void *msg, uint32_t len)
{
	struct ofi_lanes_msg m = { 0 };

	if (len == sizeof(m))
		memcpy(&m, msg, sizeof(m));
	if (m.magic != OFI_LANES_MAGIC || c->is_send)
		return 0;
	if ((m.down & ofi_all_lanes(c)) != c->peer_down)
		BRAID_INFO(NCCL_NET,
			   "ofi: receive comm from %s: the sender's word: its NICs down are now "
			   "lanes %#x of %d (were %#x)",
			   c->peer, m.down & ofi_all_lanes(c), c->nlanes, c->peer_down);
	c->peer_down = m.down & ofi_all_lanes(c);
	c->lanes_next_ns = 0; /* the next group takes it in */
	return 1;
}

/* The lanes the group leaves out move on to the next (the CQ reader's window, ofi_cq.c). */
void ofi_live_send_left_out(struct ofi_comm *c)
{
	for (int k = 0; k < c->nlanes; k++) {
		struct ofi_lane *l = &c->lane[k];

		if (c->gmask >> k & 1)
			continue;
		pthread_mutex_lock(&l->dev->ep_lock);
		l->seq = c->seq + 1;
		pthread_mutex_unlock(&l->dev->ep_lock);
	}
}
