// SPDX-License-Identifier: Apache-2.0
/*
 * A fused comm's stripe (docs/multirail.md, net_ofi): the sender measures each lane's
 * goodput and tells the receiver its weights over lane 0 (injected, OFI_MSG_WEIGHTS);
 * the receiver cuts the buffers it posts by the newest ones. Out of line: a one-lane
 * comm's calls carry none of it.
 */
#include "net_ofi/ofi.h"
#include "net_ofi/ofi_lanes.h"
#include "plugin/clock.h"
#include "plugin/log.h"

/* The lanes' weights as the counters show them (ppm). */
static void weights_to_counters(struct ofi_comm *c)
{
	for (int k = 0; c->ctr && k < c->nlanes && k < BRAID_CTR_MAX_LANES; k++)
		c->ctr->lanes[k].weight_ppm = (uint32_t)(braid_stripe_weight(&c->stripe, k) *
								 1000000 +
							 0.5);
}

void ofi_stripe_follow(struct ofi_comm *c)
{
	uint64_t w = __atomic_load_n(&c->weights_in, __ATOMIC_RELAXED);

	ofi_live_recv_lanes(c);
	if (w != c->weights_cut) {
		c->weights_cut = w;
		if (!braid_stripe_follow(&c->stripe, w))
			weights_to_counters(c);
	}
}

/* Sender: when the weights moved, tell the receiver, which cuts by them (ofi_wire.h). A
 * message the provider cannot take now goes at a later completion; one it refuses
 * stops them, and the cut stays where it was (the data path does not need them). */
static void send_weights(struct ofi_comm *c)
{
	uint64_t wire = braid_stripe_weights_wire(&c->stripe);
	struct ofi_lane *l = &c->lane[0];
	int rc;

	if (!braid_stripe_wire_moved(c->weights_sent, wire, c->nlanes))
		return;
	pthread_mutex_lock(&l->dev->ep_lock);
	rc = ofi_post_weights(l, wire, c->weights_seq + 1);
	pthread_mutex_unlock(&l->dev->ep_lock);
	if (rc == -FI_EAGAIN)
		return;
	if (rc) {
		BRAID_WARN("ofi: fused send comm to %s on %s: sending its weights failed: %s; "
			   "the receiver's cut stays as it is",
			   c->peer, l->dev->name, ofi_strerror(rc));
		c->weights_on = 0;
		return;
	}
	c->weights_seq++;
	c->weights_sent = wire;
	weights_to_counters(c);
}

void ofi_stripe_sent(struct ofi_comm *c, struct ofi_req *r, uint8_t lanes)
{
	uint64_t now = braid_now_ns();
	double rate, others;
	int slow;

	r->noted |= lanes;
	for (int k = 0; k < c->nlanes; k++)
		if (lanes & (1u << k))
			braid_stripe_completed(&c->stripe, k, r->slen[k], now);
	braid_stripe_reaped(&c->stripe);
	for (int k = 0; c->ctr && k < c->nlanes && k < BRAID_CTR_MAX_LANES; k++)
		c->ctr->lanes[k].rate_bps = (uint64_t)braid_stripe_rate(&c->stripe, k);
	if (c->weights_on)
		send_weights(c);
	slow = braid_stripe_slow_lane(&c->stripe, &rate, &others);
	if (slow < 0 || slow >= c->nlanes)
		return;
	BRAID_WARN("ofi: fused send comm to %s: NIC %s carries %.0f MB/s, under half the %.0f "
		   "MB/s of the comm's other NICs; %s. Check its link and path.",
		   c->peer, c->lane[slow].dev->name, rate / 1e6, others / 1e6,
		   c->weights_on ? "striping gives it less (BRAID_STRIPE=adaptive)"
				 : "the receiver cuts equal shares, so the device runs at the "
				   "slow NIC's pace");
	if (c->ctr)
		c->ctr->lanes[slow].slow = 1;
	braid_ctr_add(&c->lane[slow].dev->ctr->slow_lanes, 1);
}

void ofi_stripe_received(struct ofi_comm *c, struct ofi_req *r)
{
	const struct ofi_recv_part *recv = ofi_req_recv(r);
	uint64_t now = braid_now_ns();

	for (int k = 0; k < c->nlanes; k++) {
		size_t bytes = 0, parts = 0; /* a lane with none of a buffer carried nothing */

		for (int i = 0; i < r->n; i++) {
			bytes += recv->rl[k].ann.e[i].size;
			parts += (recv->rl[k].ann.e[i].flags & OFI_PART_POSTED) != 0;
		}
		braid_stripe_completed(&c->stripe, k, bytes, now);
		if (c->ctr && k < BRAID_CTR_MAX_LANES) {
			braid_ctr_add(&c->ctr->lanes[k].bytes, bytes);
			braid_ctr_add(&c->ctr->lanes[k].chunks, parts);
		}
	}
}

/* A grouped receive's buffer i, cut: its parts held against the lanes while the group's
 * later buffers are cut (d = 1), then let go (d = -1). Out of line: a group on a fused
 * comm only. */
void ofi_stripe_hold(struct ofi_comm *c, const struct ofi_req *r, int i, int d)
{
	const struct ofi_recv_part *recv = ofi_req_recv((struct ofi_req *)r);

	for (int k = 0; k < c->nlanes; k++)
		braid_stripe_hold(&c->stripe, k, (int64_t)d * (int64_t)recv->rl[k].len[i]);
}
