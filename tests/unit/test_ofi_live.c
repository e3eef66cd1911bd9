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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_ofi/ofi.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "tests/unit/unit.h"

#define MS 1000000ULL

static struct ofi_dev devs[2];

static struct ofi_comm *fake_comm(int nlanes, const char *name0, const char *name1)
{
	struct ofi_comm *c = calloc(1, sizeof(*c) + 2 * sizeof(c->lane[0]));
	const char *names[2] = { name0, name1 ? name1 : "" };

	assert_non_null(c);
	c->nlanes = nlanes;
	snprintf(c->peer, sizeof(c->peer), "198.18.1.1:4000");
	c->inflight = 3;
	for (int k = 0; k < nlanes; k++) {
		memset(&devs[k], 0, sizeof(devs[k]));
		snprintf(devs[k].name, sizeof(devs[k].name), "%s", names[k]);
		pthread_mutex_init(&devs[k].lock, NULL);
		c->lane[k].dev = &devs[k];
		c->lane[k].k = (uint8_t)k;
	}
	return c;
}

static void set_env(const char *timeout_ms, const char *liveness_ms)
{
	setenv("BRAID_OFI_DOWN_TIMEOUT_MS", timeout_ms, 1);
	setenv("BRAID_LIVENESS_MS", liveness_ms, 1);
	braid_params_reset();
	braid_log_set_logger(unit_logger);
	unit_log_reset();
}

static void late_part_fails_the_comm_at_the_bound(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct ofi_req r = { .first = 7 };

	(void)state;
	set_env("2000", "100");
	assert_int_equal(ofi_live_parts(c, &r, 0, 5000 * MS), 0); /* nothing in: waits */
	assert_int_equal(r.split_ns, 0);
	assert_int_equal(ofi_live_parts(c, &r, 1, 10000 * MS), 0); /* lane 0 in */
	assert_int_equal(r.split_ns, 10000 * MS);
	assert_int_equal(ofi_live_parts(c, &r, 1, 11999 * MS), 0);
	assert_int_equal(unit_warns, 0);
	assert_int_equal(ofi_live_parts(c, &r, 1, 12000 * MS), -1);
	assert_int_equal(unit_warns, 1);
	assert_non_null(strstr(unit_log,
			       "ofi: receive comm from 198.18.1.1:4000: NIC fake1 (lane "
			       "1 of 2) failed: buffer 7's part on it is still out 2.0 s"));
	assert_non_null(strstr(unit_log, "BRAID_OFI_DOWN_TIMEOUT_MS=2000"));
	/* lane 1 in first: lane 0 is the late one */
	r = (struct ofi_req){ .first = 9 };
	unit_log_reset();
	assert_int_equal(ofi_live_parts(c, &r, 2, 1000 * MS), 0);
	assert_int_equal(ofi_live_parts(c, &r, 2, 3000 * MS), -1);
	assert_non_null(strstr(unit_log, "NIC fake0 (lane 0 of 2) failed"));
	free(c);
}

static void every_part_in_or_one_lane_never_fails(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct ofi_req r = { .first = 1, .split_ns = 1 };

	(void)state;
	set_env("100", "100");
	assert_int_equal(ofi_live_parts(c, &r, 3, 3600000 * MS), 0);
	c->nlanes = 1;
	assert_int_equal(ofi_live_parts(c, &r, 1, 3600000 * MS), 0);
	assert_int_equal(unit_warns, 0);
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

	(void)state;
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
	/* the sender's NIC on lane 0 down too: nothing to move to, every lane stays */
	c->peer_down = 1;
	ofi_live_recv_lanes_at(c, 1200 * MS);
	assert_int_equal(c->lanes_out, 0);
	assert_int_equal(c->stripe.lane[1].down, 0);
	/* only the sender's: lane 0 out */
	mark_down(&devs[1], 0, 1250 * MS);
	unit_log_reset();
	ofi_live_recv_lanes_at(c, 1300 * MS);
	assert_int_equal(c->lanes_out, 1);
	assert_int_equal(c->stripe.lane[0].down, 1);
	assert_non_null(strstr(unit_log, "NIC fake0 (lane 0 of 2) left out of new receives: "
					 "the sender's NIC on that lane is down"));
	/* up on both sides: back in */
	c->peer_down = 0;
	unit_log_reset();
	ofi_live_recv_lanes_at(c, 1400 * MS);
	assert_int_equal(c->lanes_out, 0);
	assert_int_equal(c->stripe.lane[0].down, 0);
	assert_non_null(strstr(unit_log, "NIC fake0 (lane 0 of 2) back in new receives"));
	assert_int_equal(unit_warns, 0); /* per comm at INFO: the NIC's own edge is the WARN */
	/* and its weight back, from the sender's newest weights (here the first, equal) */
	assert_true(braid_stripe_weight(&c->stripe, 0) == 0);
	ofi_stripe_follow(c);
	assert_true(braid_stripe_weight(&c->stripe, 0) > 0.49);
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

/* The receiver's answer to the sender's ask to move a group's parts off a lane whose NIC
 * is down on the sender's side (net_ofi/ofi_move.c), as the sender takes it: moved (the
 * lane's announcement installed, sent via the other lane), refused (it waits for the lane
 * as before), moved unasked (the receiver's own NIC down: installed as well, for any group
 * of the window whose lane announcement is not in), or a protocol error that fails the
 * comm. Mirrors the wire struct ofi_moved there. */
struct moved_msg {
	uint32_t magic, seq;
	uint8_t from, via, ok, pad;
	struct ofi_announce ann;
};

static uint32_t moved_len(uint32_t n)
{
	return (uint32_t)(offsetof(struct moved_msg, ann) + ofi_announce_len(n));
}

/* A fused sender at group 5 on both lanes, its moves over the fake link lk. */
static struct ofi_comm *sender_at_5(struct braid_link *lk)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");

	*lk = (struct braid_link){ 0 };
	unit_log_reset();
	c->link = lk;
	c->is_send = 1;
	ofi_move_attach(c);
	c->seq = 5;
	c->lane[0].seq = c->lane[1].seq = 5;
	return c;
}

/* The receiver's answer to an ask for a group that completed here already: none. The
 * sender took the receiver's unasked MOVED, which crossed its ask, as the answer, and sent
 * the group; a refusal now would fail its comm. An ask for a group not posted yet is
 * still refused (the reply fails here: the fake link has no socket). */
static void receiver_ignores_an_ask_for_a_completed_group(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct braid_link lk = { .chan = { .fd = -1 } };
	const uint32_t ask[3] = { 0x6f666d71u /* "ofmq" */, 7, 2 }; /* group 7, lane 1 */
	const uint32_t ahead[3] = { 0x6f666d71u, 12, 2 };

	(void)state;
	set_env("2000", "100");
	c->link = &lk;
	ofi_move_attach(c);
	assert_non_null(lk.on_msg);
	c->seq = 10; /* groups 0 to 9 posted, none in flight */
	lk.on_msg(lk.msg_arg, ask, sizeof(ask));
	assert_int_equal(c->error, ncclSuccess);
	assert_non_null(strstr(unit_log, "the ask to move group 7 came after the group "
					 "completed: no answer"));
	lk.on_msg(lk.msg_arg, ahead, sizeof(ahead));
	assert_int_equal(c->error, ncclSystemError);
	assert_non_null(strstr(unit_log, "answering the sender's ask to move group 12"));
	free(c);
}

/*
 * Both ends' NICs on lane 1 down: the receiver moved group 7's lane-1 parts unasked
 * (ofi_move_own) while the sender's ask for the same group was on the link. Its MOVED
 * answers the ask; move_serve must send nothing more. Here lane 0 is not in the group, so
 * anything it sent would be a refusal, which the sender read as "not asked for" and failed
 * on; the link's fd is -1, so any answer at all fails this comm.
 */
static void receiver_skips_an_ask_for_a_lane_it_moved(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct braid_link lk = { .chan = { .fd = -1 } };
	const uint32_t ask[3] = { 0x6f666d71u /* "ofmq" */, 7, 2 }; /* group 7, lane 1 */
	struct ofi_req *r;

	(void)state;
	set_env("2000", "100");
	unit_log_reset();
	c->link = &lk;
	ofi_move_attach(c);
	assert_int_equal(braid_pool_init(&c->reqs, OFI_RECV_REQ_SIZE(2), 4, -1), 0);
	r = braid_pool_get(&c->reqs);
	assert_non_null(r);
	r->magic = BRAID_MAGIC_REQ;
	r->lanes = 2;
	r->moved = 2;
	ofi_req_recv(r)->rl[0].ann.seq = 7;
	c->seq = 8; /* group 7 posted and in flight */
	lk.on_msg(lk.msg_arg, ask, sizeof(ask));
	assert_int_equal(c->error, ncclSuccess);
	assert_null(strstr(unit_log, "answering the sender's ask to move group 7"));
	braid_pool_fini(&c->reqs);
	free(c);
}

/*
 * A group announced on both lanes before the sender's NIC on lane 1 went down: nothing of
 * it has gone on lane 1, so the sender asks to move those parts (the receiver's asked
 * path moves announced groups) instead of posting them into the dead NIC's queue, where
 * they waited for the comm's bound (netns-failover case 2 under ASan). Not once a buffer
 * went there, nor for a lane moved or refused, nor with no other lane up here to take it.
 */
static void sender_asks_for_an_announced_lane_down_here(void **state)
{
	struct braid_link lk;
	struct ofi_comm *c = sender_at_5(&lk);
	struct ofi_group *g1 = &c->lane[1].ring[5];
	uint32_t got[64] = { 0 };
	ssize_t n;
	int sv[2];

	(void)state;
	for (int k = 0; k < 2; k++) {
		c->lane[k].ring[5].ann = (struct ofi_announce){ .n = 2, .seq = 5, .first = 40 };
		c->lane[k].ring[5].arrived = 1;
	}
	assert_int_equal(ofi_move_lost(c, 3, 3), 0); /* no NIC down here */
	c->told_down = 2;
	assert_int_equal(ofi_move_lost(c, 3, 3), 2);
	g1->used = 1; /* buffer 0 went on lane 1: the sender cannot vouch */
	assert_int_equal(ofi_move_lost(c, 3, 3), 0);
	g1->used = 0;
	g1->via = 1; /* moved already */
	assert_int_equal(ofi_move_lost(c, 3, 3), 0);
	g1->via = 0;
	c->move_seq = 5;
	c->move_refused = 2;
	assert_int_equal(ofi_move_lost(c, 3, 3), 0);
	c->move_seq = 4; /* an older group's refusal: this one asks again */
	assert_int_equal(ofi_move_lost(c, 3, 3), 2);
	c->told_down = 3; /* no lane up here to take them */
	assert_int_equal(ofi_move_lost(c, 3, 3), 0);
	c->told_down = 2;
	c->move_on = 0; /* BRAID_FAILOVER=off */
	assert_int_equal(ofi_move_lost(c, 3, 3), 0);
	c->move_on = 1;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	braid_oob_chan_init(&lk.chan, sv[0]);
	ofi_move_ask(c, 1000 * MS);
	assert_int_equal(c->error, ncclSuccess);
	assert_int_equal(c->move_asked, 2);
	assert_int_equal(c->move_seq, 5);
	n = read(sv[1], got, sizeof(got));
	assert_true(n >= 12); /* the link's frame, then { "ofmq", group 5, lanes 0x2 } */
	assert_int_equal(got[n / 4 - 3], 0x6f666d71u);
	assert_int_equal(got[n / 4 - 2], 5);
	assert_int_equal(got[n / 4 - 1], 2);
	assert_int_equal(ofi_move_lost(c, 3, 3), 0); /* asked once */
	assert_int_equal(ofi_move_awaited(c, 1001 * MS), 2);
	close(sv[0]);
	close(sv[1]);
	free(c);
}

static void sender_takes_moved_parts(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct braid_link lk = { 0 };
	struct moved_msg m = { .magic = 0x6f666d76u /* "ofmv" */,
			       .seq = 5,
			       .from = 1,
			       .via = 0,
			       .ok = 1 };
	uint32_t want, in;

	(void)state;
	set_env("2000", "100");
	c->link = &lk;
	c->is_send = 1;
	ofi_move_attach(c);
	assert_non_null(lk.on_msg);
	assert_int_equal(c->move_on, 1); /* BRAID_FAILOVER's default */
	c->seq = 5;
	c->lane[0].seq = c->lane[1].seq = 5;
	/* group 5 announced on lane 0 only; lane 1 asked for at 1 s */
	c->lane[0].ring[5].ann = (struct ofi_announce){ .n = 2, .seq = 5, .first = 40 };
	c->lane[0].ring[5].arrived = 1;
	c->move_seq = 5;
	c->move_asked = 2;
	c->move_ask_ns = 1000 * MS;
	assert_int_equal(ofi_move_awaited(c, 2999 * MS), 2);
	assert_int_equal(ofi_move_awaited(c, 3000 * MS), 0); /* past the bound: the NIC's */
	assert_int_equal(ofi_move_awaited(c, 0), 2);
	m.ann = (struct ofi_announce){ .n = 2, .seq = 5, .first = 40 };
	m.ann.e[0].size = 4096;
	m.ann.e[1].size = 8192;
	m.ann.e[0].flags = m.ann.e[1].flags = OFI_PART_POSTED;
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclSuccess);
	assert_int_equal(c->move_done, 2);
	assert_int_equal(ofi_move_awaited(c, 0), 0);
	assert_int_equal(c->lane[1].ring[5].arrived, 1);
	assert_int_equal(c->lane[1].ring[5].via, 1); /* lane 0, + 1 */
	assert_int_equal(c->lane[1].ring[5].ann.e[1].size, 8192);
	assert_int_equal(c->lane[1].nmoved, 1);
	assert_non_null(ofi_send_group(c, &want, &in));
	assert_int_equal(in, 3);
	assert_non_null(strstr(unit_log, "NIC fake1 (lane 1 of 2) is down here: the receiver "
					 "moved its parts of group 5 (2 buffer(s)) to NIC fake0"));
	/* A refusal after the move was taken (the receiver read the ask after its own
	 * unasked MOVED had crossed it, or after the group completed): ignored. It was a
	 * protocol error ("not asked for") that failed the comm. So is one for a group the
	 * sender is past. */
	m.ok = 0;
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclSuccess);
	assert_non_null(strstr(unit_log, "a late refusal to move group 5's parts off lane 1"));
	c->seq = 6;
	m.seq = m.ann.seq = 4;
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclSuccess);
	c->seq = 5;
	m.seq = m.ann.seq = 5;
	m.ok = 1;
	/* asked for again? no: answered; a second answer is a protocol error */
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclRemoteError);
	assert_non_null(strstr(unit_log, "moved already"));
	free(c);

	/* unasked (the receiver's own NIC on lane 1 down, ofi_move_own), for group 6, ahead
	 * of the sender's group 5: installed in lane 1's slot 6 with via lane 0 */
	c = sender_at_5(&lk);
	m.seq = m.ann.seq = 6;
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclSuccess);
	assert_int_equal(c->lane[1].ring[6].arrived, 1);
	assert_int_equal(c->lane[1].ring[6].via, 1);
	assert_int_equal(c->move_done, 0); /* not the current group: its slot says it */
	assert_non_null(strstr(unit_log, "NIC fake1 (lane 1 of 2) is down at the receiver: the "
					 "receiver moved its parts of group 6"));
	/* the lane's next move is said at INFO: one WARN per comm and lane while it is down */
	{
		int warns = unit_warns;

		assert_int_equal(c->move_warned, 2);
		m.seq = m.ann.seq = 7;
		lk.on_msg(lk.msg_arg, &m, moved_len(2));
		assert_int_equal(c->error, ncclSuccess);
		assert_int_equal(c->lane[1].ring[7].via, 1);
		assert_int_equal(unit_warns, warns);
		assert_non_null(strstr(unit_log, "the receiver moved its parts of group 7"));
		m.seq = m.ann.seq = 6;
	}
	/* Once the sender is at group 6 (announced on lane 0), the cut sends lane 1's part
	 * of buffer 0 over lane 0. Gated on move_done, it went on lane 1, whose receives
	 * were cancelled: "posting failed: No route to host" in netns-failover case 10
	 * under ASan, when group 24's unasked move came before group 23's. */
	{
		struct ofi_req *r = calloc(1, OFI_SEND_REQ_SIZE(2));

		assert_non_null(r);
		c->seq = 6;
		c->lane[0].ring[6].ann = m.ann;
		c->lane[0].ring[6].arrived = 1;
		c->gmask = 3;
		ofi_cut_send(c, r, 0, 8192); /* 4096 on each lane */
		assert_int_equal(r->lanes, 3);
		assert_int_equal(r->skip, 0);
		assert_int_equal(r->moved, 2);
		assert_int_equal(r->slen[1], 4096);
		assert_int_equal(ofi_req_sop(r, 1)->type, OFI_OP_SEND_MOVED);
		assert_ptr_equal(ofi_req_sop(r, 1)->l, &c->lane[0]);
		assert_int_equal(ofi_req_sop(r, 0)->type, OFI_OP_SEND);
		free(r);
		c->seq = 5;
	}
	/* a move to a lane the group does not name (its announcement's lanes) is one */
	{
		struct ofi_comm *c2 = sender_at_5(&lk);

		m.ann.kind = 0x2u << 8; /* group 6 on lane 1 only */
		lk.on_msg(lk.msg_arg, &m, moved_len(2));
		assert_int_equal(c2->error, ncclRemoteError);
		assert_int_equal(c2->lane[1].ring[6].via, 0);
		m.ann.kind = 0;
		free(c2);
		lk = (struct braid_link){ 0 };
		c->link = &lk;
		ofi_move_attach(c);
	}
	/* unasked refusals, and groups past the window, are protocol errors */
	m.seq = m.ann.seq = 5 + 32;
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclRemoteError);
	free(c);
	m.seq = m.ann.seq = 5;

	/* refused: nothing installed, the lane is no longer awaited, and not asked again */
	c = sender_at_5(&lk);
	c->move_seq = 5;
	c->lane[0].ring[5].ann = (struct ofi_announce){ .n = 2, .seq = 5, .first = 40 };
	c->lane[0].ring[5].arrived = 1;
	c->move_asked = 2;
	m.ok = 0;
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclSuccess);
	assert_int_equal(c->lane[1].ring[5].arrived, 0);
	assert_int_equal(c->move_refused, 2);
	assert_int_equal(ofi_move_awaited(c, 0), 0);
	/* a refusal not asked for (lane 1 refused already): a protocol error */
	lk.on_msg(lk.msg_arg, &m, moved_len(2));
	assert_int_equal(c->error, ncclRemoteError);
	assert_non_null(strstr(unit_log, "protocol error: a MOVED message"));
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
		cmocka_unit_test(every_part_in_or_one_lane_never_fails),
		cmocka_unit_test(late_announcement_fails_the_sender_at_the_bound),
		cmocka_unit_test(no_interface_or_up_is_never_down),
		cmocka_unit_test(stale_or_recent_down_mark),
		cmocka_unit_test(send_waiting_is_named_once),
		cmocka_unit_test(receiver_leaves_a_down_lane_out),
		cmocka_unit_test(sender_group_names_its_lanes),
		cmocka_unit_test(sender_word_on_its_nics),
		cmocka_unit_test(sender_takes_moved_parts),
		cmocka_unit_test(receiver_ignores_an_ask_for_a_completed_group),
		cmocka_unit_test(receiver_skips_an_ask_for_a_lane_it_moved),
		cmocka_unit_test(sender_asks_for_an_announced_lane_down_here),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
