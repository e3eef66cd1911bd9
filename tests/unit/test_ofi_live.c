// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi/ofi_live.c under a live comm: TCP retransmits into a dead path for about 15 min
 * and libfabric's tcp provider sets no timeout, so braid bounds it itself
 * (BRAID_OFI_DOWN_TIMEOUT_MS).
 *   - A fused receive whose part on one NIC is still out the bound after another NIC's
 *     part landed fails the comm, with one WARN naming that NIC, its lane and the peer;
 *     not a moment before the bound, and never while no part or every part is in; the
 *     same for a fused sender waiting on the receiver's announcement of a group.
 *   - A NIC that is no interface (EFA's, shm's domains), or an interface that is up, is
 *     never down, and a waiting comm looks at most once per BRAID_LIVENESS_MS.
 *   - A send still waiting the bound is named (a one-NIC black hole), and fails nothing.
 *   - A fused receiver leaves a lane whose NIC is down on either side out of new groups,
 *     and the sender reads a group's lanes from its announcement.
 * An interface going down under a comm needs namespaces: tests/conformance/netns-failover.sh.
 */
#include <string.h>

#include "tests/unit/ofi_fake.h"

/* A receive of one buffer on 2 lanes, with a part posted on the lanes in `parts`. */
static struct ofi_req *recv_req(uint64_t first, uint32_t parts)
{
	struct ofi_req *r = calloc(1, sizeof(*r) + sizeof(struct ofi_recv_part) +
					      2 * sizeof(struct ofi_recv_lane));

	assert_non_null(r);
	r->first = first;
	r->n = 1;
	r->lanes = 3;
	for (int k = 0; k < 2; k++)
		ofi_req_recv(r)->rl[k].ann.e[0].flags = parts >> k & 1 ? OFI_PART_POSTED : 0;
	return r;
}

static void late_part_fails_the_comm_at_the_bound(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct ofi_req *rp = recv_req(7, 3);

	(void)state;
	set_env("2000", "100");
	assert_int_equal(ofi_live_parts(c, rp, 0, 5000 * MS), 0); /* nothing in: waits */
	assert_int_equal(rp->split_ns, 0);
	assert_int_equal(ofi_live_parts(c, rp, 1, 10000 * MS), 0); /* lane 0 in */
	assert_int_equal(rp->split_ns, 10000 * MS);
	assert_int_equal(ofi_live_parts(c, rp, 1, 11999 * MS), 0);
	assert_int_equal(unit_warns, 0);
	assert_int_equal(ofi_live_parts(c, rp, 1, 12000 * MS), -1);
	assert_int_equal(unit_warns, 1);
	assert_non_null(strstr(unit_log,
			       "ofi: receive comm from 198.18.1.1:4000: NIC fake1 (lane "
			       "1 of 2) failed: buffer 7's part on it is still out 2.0 s"));
	assert_non_null(strstr(unit_log, "BRAID_OFI_DOWN_TIMEOUT_MS=2000"));
	/* lane 1 in first: lane 0 is the late one */
	rp->first = 9;
	rp->split_ns = 0;
	unit_log_reset();
	assert_int_equal(ofi_live_parts(c, rp, 2, 1000 * MS), 0);
	assert_int_equal(ofi_live_parts(c, rp, 2, 3000 * MS), -1);
	assert_non_null(strstr(unit_log, "NIC fake0 (lane 0 of 2) failed"));
	free(rp);
	free(c);
}

/* With lanes `done` in at 1 s, the part still out at 3 s (the 2 s bound) fails the comm
 * with one WARN naming `nic` (lane k of 3). */
static void late_is(struct ofi_comm *c, struct ofi_req *r, uint32_t done, const char *nic)
{
	r->split_ns = 0;
	unit_log_reset();
	assert_int_equal(ofi_live_parts(c, r, done, 1000 * MS), 0);
	assert_int_equal(ofi_live_parts(c, r, done, 3000 * MS), -1);
	assert_non_null(strstr(unit_log, nic));
}

/*
 * Three lanes, lane 0's part moved to lane 1 (ofi_move.c): lane 0 carries nothing any
 * more, and a part still out is lane 1's (the moved one, or its own) or lane 2's. The
 * WARN names the lane that holds it, never the lane the part moved off.
 */
static void late_part_after_a_move_names_the_lane_that_holds_it(void **state)
{
	struct ofi_comm *c = fake_comm(3, "fake0", "fake1");
	struct ofi_req *r = calloc(1, sizeof(*r) + sizeof(struct ofi_recv_part) +
					      3 * sizeof(struct ofi_recv_lane));
	struct ofi_recv_lane *rl;

	(void)state;
	assert_non_null(r);
	set_env("2000", "100");
	rl = ofi_req_recv(r)->rl;
	r->first = 5;
	r->n = 1;
	r->lanes = 7;
	for (int k = 0; k < 3; k++)
		rl[k].ann.e[0].flags = OFI_PART_POSTED;
	r->moved = 1;
	rl[0].op[0].lane = 1; /* lane 0's part, out on lane 1 */
	/* lane 2 in; lane 1 holds its own part and the moved one */
	late_is(c, r, 4, "NIC fake1 (lane 1 of 3) failed");
	/* lane 1 in with the moved part too; lane 2 is the late one */
	late_is(c, r, 2, "NIC fake2 (lane 2 of 3) failed");
	/* a part posted only through the move: lane 1 has none of its own */
	rl[1].ann.e[0].flags = 0;
	late_is(c, r, 4, "NIC fake1 (lane 1 of 3) failed");
	/* ...and landed there (lane 1 done, by the moved part alone): it delivered, so lane
	 * 2's part still out is late; before, lane 1 stopped counting as a carrier once the
	 * part landed and nothing was ever late */
	late_is(c, r, 2, "NIC fake2 (lane 2 of 3) failed");
	/* test() passes every lane done, a moved-off one's too: lane 0 counts for nothing.
	 * Then lane 1's own part moves to lane 2 as well: lane 1 carries lane 0's part (in)
	 * and lane 2 its own and lane 1's (out): late is lane 2, never lane 1, nor nothing
	 * (done masked by the moved lanes left lane 1's delivery out) */
	rl[1].ann.e[0].flags = OFI_PART_POSTED;
	rl[1].op[0].lane = 2;
	r->moved = 3;
	late_is(c, r, 3, "NIC fake2 (lane 2 of 3) failed");
	free(r);
	free(c);
}

/* A message under the stripe threshold goes whole to one lane, and the other lane posts
 * no receive for it: that lane is done at once, long before a late sender sends. Its
 * being done says nothing of the other lane's path: a receive waiting for a slow rank
 * (NCCL posts receives before the peer sends) waits as on one NIC. */
static void small_message_waits_for_a_late_sender(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct ofi_req *r = recv_req(3, 1); /* the part on lane 0 only */

	(void)state;
	set_env("2000", "100");
	assert_int_equal(ofi_live_parts(c, r, 2, 1000 * MS), 0);
	assert_int_equal(ofi_live_parts(c, r, 2, 3600000 * MS), 0);
	r->lanes = 1; /* the group leaves lane 1 out: the same */
	ofi_req_recv(r)->rl[1].ann.e[0].flags = OFI_PART_POSTED;
	assert_int_equal(ofi_live_parts(c, r, 2, 7200000 * MS), 0);
	assert_int_equal(unit_warns, 0);
	free(r);
	free(c);
}

static void every_part_in_or_one_lane_never_fails(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct ofi_req *r = recv_req(1, 3);

	(void)state;
	r->split_ns = 1;
	set_env("100", "100");
	assert_int_equal(ofi_live_parts(c, r, 3, 3600000 * MS), 0);
	c->nlanes = 1;
	assert_int_equal(ofi_live_parts(c, r, 1, 3600000 * MS), 0);
	assert_int_equal(unit_warns, 0);
	free(r);
	free(c);
}

/* The sender's side: the receiver's announcement of the group it waits for, in on one lane
 * and not on the other, with no message in flight yet for the receiver to see. */
static void late_announcement_fails_the_sender_at_the_bound(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	uint32_t slot;

	(void)state;
	set_env("2000", "100");
	c->is_send = 1;
	c->seq = 5;
	slot = c->seq % OFI_MAX_INFLIGHT;
	assert_int_equal(ofi_live_announce(c, 1000 * MS), 0); /* none in: the receiver idles */
	c->lane[1].ring[slot].arrived = 1;
	assert_int_equal(ofi_live_announce(c, 2000 * MS), 0);
	assert_int_equal(ofi_live_announce(c, 3999 * MS), 0);
	/* it came on lane 0 too: no longer split; then the next group splits afresh */
	c->lane[0].ring[slot].arrived = 1;
	assert_int_equal(ofi_live_announce(c, 3999 * MS), 0);
	c->seq++;
	slot = c->seq % OFI_MAX_INFLIGHT;
	c->lane[1].ring[slot].arrived = 1;
	assert_int_equal(ofi_live_announce(c, 5000 * MS), 0);
	assert_int_equal(ofi_live_announce(c, 6999 * MS), 0);
	assert_int_equal(unit_warns, 0);
	assert_int_equal(ofi_live_announce(c, 7000 * MS), -1);
	assert_int_equal(unit_warns, 1);
	assert_non_null(strstr(unit_log, "ofi: send comm to 198.18.1.1:4000: NIC fake0 (lane 0 "
					 "of 2) failed: the receiver's announcement of its next "
					 "buffers is still out on it 2.0 s"));
	/* anything completing on the late NIC (a receiver whose queue there is full holds
	 * its announcement back, while other traffic moves) starts the count again */
	c->ann_split_ns = 0;
	assert_int_equal(ofi_live_announce(c, 10000 * MS), 0);
	devs[0].completions++;
	assert_int_equal(ofi_live_announce(c, 11000 * MS), 0);
	assert_int_equal(ofi_live_announce(c, 12999 * MS), 0);
	assert_int_equal(ofi_live_announce(c, 13000 * MS), -1);
	/* an interface seen down is left to its own bound */
	c->ann_split_ns = 0;
	devs[0].link_down_ns = 1;
	assert_int_equal(ofi_live_announce(c, 8000 * MS), 0);
	assert_int_equal(ofi_live_announce(c, 20000 * MS), 0);
	free(c);
}

static void no_interface_or_up_is_never_down(void **state)
{
	struct ofi_comm *c = fake_comm(2, "rdmap0s31-rdm", "lo");

	(void)state;
	set_env("100", "50");
	assert_int_equal(ofi_live_watch(c, 1000 * MS, 1), 0);
	assert_int_equal(c->live_next_ns, 1050 * MS); /* next look: one liveness period on */
	assert_int_equal(devs[0].link_next_ns, 1050 * MS);
	assert_int_equal(ofi_live_watch(c, 1000000 * MS, 1), 0);
	assert_int_equal(devs[0].link_down_ns, 0);
	assert_int_equal(devs[1].link_down_ns, 0);
	assert_int_equal(unit_warns, 0);
	free(c);
}

/* An interface that was one at init and is gone (deleted since) reads down, and a comm
 * waiting on it fails at the bound, naming it; a name that never was one stays up. */
static void deleted_interface_is_down(void **state)
{
	struct ofi_comm *c = fake_comm(2, "lo", "braidgone0");

	(void)state;
	set_env("2000", "100");
	assert_int_equal(devs[0].is_iface, 1);
	assert_int_equal(devs[1].is_iface, 0);
	assert_int_equal(ofi_dev_link_down(&devs[1]), 0); /* never an interface: EFA, shm */
	devs[1].is_iface = 1;                             /* one at init, deleted since */
	assert_int_equal(ofi_dev_link_down(&devs[1]), 1);
	assert_int_equal(ofi_dev_link_down(&devs[0]), 0);
	assert_int_equal(ofi_live_watch(c, 1000 * MS, 2), 0);
	assert_int_equal(devs[1].link_down_ns, 1000 * MS);
	assert_non_null(strstr(unit_log, "ofi: NIC braidgone0: its interface went down"));
	for (uint64_t t = 1100; t < 3000;
	     t += 100) /* read each period: an outage, not a stale mark */
		assert_int_equal(ofi_live_watch(c, t * MS, 2), 0);
	assert_int_equal(ofi_live_watch(c, 3100 * MS, 2), -1);
	assert_non_null(strstr(unit_log, "NIC braidgone0 (lane 1 of 2) failed: its interface has "
					 "been down for 2.1 s"));
	free(c);
}

/* A NIC seen down, then not read for a while (no comm waited on it): the old mark is not
 * taken as a long outage; a fresh read decides. A recent read that saw it down counts. */
static void stale_or_recent_down_mark(void **state)
{
	struct ofi_comm *c = fake_comm(1, "lo", NULL);

	(void)state;
	set_env("2000", "100");
	devs[0].link_down_ns = 1000 * MS;
	devs[0].link_read_ns = 1000 * MS;
	pthread_mutex_lock(&devs[0].lock); /* the reader cannot take it: the old mark stays */
	assert_int_equal(ofi_live_watch(c, 60000 * MS, 1), 0);
	assert_int_equal(unit_warns, 0);
	/* read 10 ms ago and down for 3 s: failed, though this call could not read */
	devs[0].link_read_ns = 59990 * MS;
	devs[0].link_down_ns = 57000 * MS;
	assert_int_equal(ofi_live_watch(c, 60000 * MS, 1), -1);
	assert_non_null(strstr(unit_log, "NIC lo (lane 0 of 1) failed: its interface has been "
					 "down for 3.0 s (BRAID_OFI_DOWN_TIMEOUT_MS=2000)"));
	pthread_mutex_unlock(&devs[0].lock);
	/* free to read: lo is up, and the mark goes, with the edge WARNed */
	unit_log_reset();
	assert_int_equal(ofi_live_watch(c, 70000 * MS, 1), 0);
	assert_int_equal(devs[0].link_down_ns, 0);
	assert_non_null(strstr(unit_log, "ofi: NIC lo: its interface is up again"));
	free(c);
}

/* A send still waiting the bound after test() first found it waiting: named once per comm
 * (the NIC of its part not done), at WARN once per NIC and bound, and the comm goes on. */
static void send_waiting_is_named_once(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1"), *c2;
	struct ofi_req r = { .first = 4, .ssize = 1000, .waiting_ns = 10000 * MS };

	(void)state;
	set_env("2000", "100");
	r.slen[0] = 500;
	r.slen[1] = 500;
	ofi_live_send_waits(c, &r, 1, 11999 * MS); /* lane 0's part done, not yet the bound */
	assert_int_equal(unit_log[0], '\0');
	ofi_live_send_waits(c, &r, 1, 12000 * MS);
	assert_int_equal(unit_warns, 1);
	assert_non_null(strstr(unit_log,
			       "ofi: send comm to 198.18.1.1:4000: a send of 1000 "
			       "bytes (buffer 4) has waited 2.0 s on NIC fake1 (lane 1) "
			       "although the receiver had announced its buffer, and 3 "
			       "request(s) are in flight (BRAID_OFI_DOWN_TIMEOUT_MS=2000)"));
	unit_log_reset();
	ofi_live_send_waits(c, &r, 1, 60000 * MS); /* once per comm */
	assert_int_equal(unit_log[0], '\0');
	/* never found waiting: nothing to time */
	c->send_wait_warned = 0;
	r.waiting_ns = 0;
	ofi_live_send_waits(c, &r, 0, 60000 * MS);
	assert_int_equal(unit_log[0], '\0');
	/* another comm over the same NIC within the bound: at INFO; past it, a WARN again */
	c2 = fake_comm(1, "fake0", NULL);
	devs[0].send_wait_ns = 12000 * MS; /* fake_comm cleared the device */
	r.waiting_ns = 11000 * MS;
	ofi_live_send_waits(c2, &r, 0, 13000 * MS);
	assert_int_equal(unit_warns, 0);
	assert_non_null(strstr(unit_log, "has waited 2.0 s on NIC fake0 (lane 0)"));
	unit_log_reset();
	c2->send_wait_warned = 0;
	ofi_live_send_waits(c2, &r, 0, 14000 * MS);
	assert_int_equal(unit_warns, 1);
	free(c2);
	free(c);
}

/* A lane's NIC marked down by a recent read (the next read far off: the fake NICs are no
 * interfaces, and a read would find them up). */
static void mark_down(struct ofi_dev *d, uint64_t since, uint64_t now)
{
	d->link_down_ns = since;
	d->link_read_ns = now;
	d->link_next_ns = now + 3600000 * MS;
}

/* A fused receiver leaves out of its new groups a lane whose NIC is down on its side or the
 * sender's, never every lane, looks at most once per BRAID_LIVENESS_MS, and takes the lane
 * back once it is up on both sides; the stripe follows. */
static void receiver_leaves_a_down_lane_out(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct braid_ctr_comm ctr = { 0 };
	const struct braid_ctr_lane *cl = ctr.lanes;

	(void)state;
	c->ctr = &ctr; /* braid stat: a lane down on either side is a failover, back a recovery */
	c->link = &(struct braid_link){ 0 }; /* not read: no message here */
	set_env("2000", "100");
	struct braid_stripe_cfg cfg;

	braid_stripe_cfg_load(&cfg);
	cfg.mode = BRAID_STRIPE_FOLLOW; /* as a receiver's (ofi_comm.c) */
	assert_int_equal(braid_stripe_init(&c->stripe, 2, NULL, &cfg), 0);
	c->weights_in = c->weights_cut = braid_stripe_weights_wire(&c->stripe);
	ofi_live_recv_lanes_at(c, 1000 * MS);
	assert_int_equal(c->lanes_out, 0);
	mark_down(&devs[1], 1020 * MS, 1020 * MS);
	ofi_live_recv_lanes_at(c, 1050 * MS); /* within the period: not looked at */
	assert_int_equal(c->lanes_out, 0);
	ofi_live_recv_lanes_at(c, 1100 * MS);
	assert_int_equal(c->lanes_out, 2);
	assert_int_equal(c->stripe.lane[1].down, 1);
	assert_non_null(strstr(unit_log, "NIC fake1 (lane 1 of 2) left out of new receives: "
					 "its interface is down"));
	assert_int_equal(cl[1].failovers, 1);
	assert_int_equal(ctr.failovers, 1);
	/* the sender's NIC on lane 0 down too: nothing to move to, every lane stays */
	c->peer_down = 1;
	ofi_live_recv_lanes_at(c, 1200 * MS);
	assert_int_equal(c->lanes_out, 0);
	assert_int_equal(c->stripe.lane[1].down, 0);
	/* both down all the same: no recovery of lane 1, a failover of lane 0 */
	assert_int_equal(cl[1].recoveries, 0);
	assert_int_equal(cl[0].failovers, 1);
	assert_int_equal(ctr.failovers, 2);
	/* only the sender's: lane 0 out */
	mark_down(&devs[1], 0, 1250 * MS);
	unit_log_reset();
	ofi_live_recv_lanes_at(c, 1300 * MS);
	assert_int_equal(c->lanes_out, 1);
	assert_int_equal(c->stripe.lane[0].down, 1);
	assert_non_null(strstr(unit_log, "NIC fake0 (lane 0 of 2) left out of new receives: "
					 "the sender's NIC on that lane is down"));
	assert_int_equal(cl[1].recoveries, 1);
	assert_int_equal(cl[0].failovers, 1);
	/* up on both sides: back in */
	c->peer_down = 0;
	unit_log_reset();
	ofi_live_recv_lanes_at(c, 1400 * MS);
	assert_int_equal(c->lanes_out, 0);
	assert_int_equal(c->stripe.lane[0].down, 0);
	assert_non_null(strstr(unit_log, "NIC fake0 (lane 0 of 2) back in new receives"));
	assert_int_equal(cl[0].recoveries, 1);
	assert_int_equal(ctr.failovers, 2);
	assert_int_equal(ctr.recoveries, 2);
	assert_int_equal(unit_warns, 0); /* per comm at INFO: the NIC's own edge is the WARN */
	/* and its weight back, from the sender's newest weights (here the first, equal) */
	assert_true(braid_stripe_weight(&c->stripe, 0) == 0);
	ofi_stripe_follow(c);
	assert_true(braid_stripe_weight(&c->stripe, 0) > 0.49);
	free(c);
}

/*
 * No news is not "up": a NIC left out stays out while its state is not known, whether no
 * read is recent and the reader is busy (its lock taken), or another thread read it with
 * a clock ahead of this call's. Read as up, the lane went back into a group and its part
 * on a NIC down for seconds failed the comm at once (netns-failover 9 and 10 under ASan).
 */
static void receiver_keeps_a_lane_out_on_no_news(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");

	(void)state;
	c->link = &(struct braid_link){ 0 };
	set_env("2000", "100");
	struct braid_stripe_cfg cfg;

	braid_stripe_cfg_load(&cfg);
	cfg.mode = BRAID_STRIPE_FOLLOW;
	assert_int_equal(braid_stripe_init(&c->stripe, 2, NULL, &cfg), 0);
	mark_down(&devs[1], 1020 * MS, 1020 * MS);
	ofi_live_recv_lanes_at(c, 1100 * MS);
	assert_int_equal(c->lanes_out, 2);
	/* another thread read it down at 1,700 ms; this call's clock says 1,650 */
	mark_down(&devs[1], 1020 * MS, 1700 * MS);
	ofi_live_recv_lanes_at(c, 1650 * MS);
	assert_int_equal(c->lanes_out, 2);
	/* no read for 4 s, and the reader busy (the lock taken): not known, stays out */
	devs[1].link_next_ns = 0;
	pthread_mutex_lock(&devs[1].lock);
	ofi_live_recv_lanes_at(c, 5700 * MS);
	assert_int_equal(c->lanes_out, 2);
	pthread_mutex_unlock(&devs[1].lock);
	assert_null(strstr(unit_log, "back in new receives"));
	/* read, and up (a fake NIC is no interface): back in */
	ofi_live_recv_lanes_at(c, 5800 * MS);
	assert_int_equal(c->lanes_out, 0);
	assert_non_null(strstr(unit_log, "NIC fake1 (lane 1 of 2) back in new receives"));
	free(c);
}

/* The sender's word over the link: which of its NICs are down; anything else ignored. */
static void sender_word_on_its_nics(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct braid_link lk = { 0 };
	uint32_t msg[2] = { 0x6f666c64u /* "ofld" */, 2 }, bad[2] = { 0x12345678u, 1 };

	(void)state;
	set_env("2000", "100");
	c->link = &lk;
	c->is_send = 1;
	assert_int_equal(ofi_live_take_word(c, msg, sizeof(msg)), 0); /* a sender takes none */
	assert_int_equal(c->peer_down, 0);
	c->is_send = 0;
	ofi_move_attach(c); /* the comm's link messages go through ofi_move.c */
	assert_non_null(lk.on_msg);
	c->lanes_next_ns = 5000 * MS;
	lk.on_msg(lk.msg_arg, msg, sizeof(msg));
	assert_int_equal(c->peer_down, 2);
	assert_int_equal(c->lanes_next_ns, 0); /* the next group looks again */
	assert_int_equal(ofi_live_take_word(c, bad, sizeof(bad)), 0);
	lk.on_msg(lk.msg_arg, bad, sizeof(bad));
	lk.on_msg(lk.msg_arg, msg, 3);
	assert_int_equal(c->peer_down, 2);
	msg[1] = 0xff; /* past the comm's lanes: its own only */
	assert_int_equal(ofi_live_take_word(c, msg, sizeof(msg)), 1);
	assert_int_equal(c->peer_down, 3);
	free(c);
}

/* The sender's view of the current group: the lanes its announcement names (0: every
 * lane), and those it is in on. */
static void sender_group_names_its_lanes(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	uint32_t want, in;

	(void)state;
	c->seq = 33; /* slot 1 */
	assert_null(ofi_send_group(c, &want, &in));
	assert_int_equal(in, 0);
	c->lane[1].ring[1].ann.kind = OFI_MSG_ANNOUNCE | 2u << 8;
	c->lane[1].ring[1].arrived = 1;
	assert_ptr_equal(ofi_send_group(c, &want, &in), &c->lane[1].ring[1]);
	assert_int_equal(want, 2);
	assert_int_equal(in, 2);
	c->lane[1].ring[1].ann.kind = OFI_MSG_ANNOUNCE; /* an older peer's: every lane */
	ofi_send_group(c, &want, &in);
	assert_int_equal(want, 3);
	assert_int_equal(in, 2);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(late_part_fails_the_comm_at_the_bound),
		cmocka_unit_test(late_part_after_a_move_names_the_lane_that_holds_it),
		cmocka_unit_test(every_part_in_or_one_lane_never_fails),
		cmocka_unit_test(small_message_waits_for_a_late_sender),
		cmocka_unit_test(late_announcement_fails_the_sender_at_the_bound),
		cmocka_unit_test(no_interface_or_up_is_never_down),
		cmocka_unit_test(stale_or_recent_down_mark),
		cmocka_unit_test(deleted_interface_is_down),
		cmocka_unit_test(send_waiting_is_named_once),
		cmocka_unit_test(receiver_leaves_a_down_lane_out),
		cmocka_unit_test(receiver_keeps_a_lane_out_on_no_news),
		cmocka_unit_test(sender_group_names_its_lanes),
		cmocka_unit_test(sender_word_on_its_nics),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
