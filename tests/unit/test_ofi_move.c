// SPDX-License-Identifier: Apache-2.0
/*
 * net_ofi/ofi_move.c under fake fused comms: a group's parts moved off a NIC that is down
 * before anything of them was sent there. The sender asks over the link (a lane down on
 * its side, nothing of the group posted there, announced or not), the receiver answers
 * (moved, refused, or not at all for a group it completed or a lane it moved on its own),
 * and the sender takes the answer, asked for or not, and cuts the moved parts onto the lane
 * they went to. The moves across namespaces: tests/conformance/netns-failover.sh.
 */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/unit/ofi_fake.h"

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
		c->lane[k].ring[5].ann.e[0].flags = c->lane[k].ring[5].ann.e[1].flags =
			OFI_PART_POSTED;
		c->lane[k].ring[5].arrived = 1;
	}
	assert_int_equal(ofi_move_lost(c, 3, 3), 0); /* no NIC down here */
	c->told_down = 2;
	assert_int_equal(ofi_move_lost(c, 3, 3), 2);
	g1->used = 1; /* buffer 0 went on lane 1: the sender cannot vouch */
	assert_int_equal(ofi_move_lost(c, 3, 3), 0);
	/* buffer 0 had no part on lane 1 (a small message, whole on lane 0): used there,
	 * and nothing sent: buffer 1's part can still move */
	g1->ann.e[0].flags = 0;
	assert_int_equal(ofi_move_lost(c, 3, 3), 2);
	g1->ann.e[0].flags = OFI_PART_POSTED;
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

/* The sender asks to move a group's parts off lane 1 (its NIC there is down) while the
 * receiver's own NIC on lane 0, the only other lane, is down too (its interface gone):
 * the receiver refuses, and the group waits for lane 1 within the bound. Before, it moved
 * them onto lane 0, where nothing can come. */
static void receiver_refuses_a_move_onto_a_lane_down_here(void **state)
{
	struct ofi_comm *c = fake_comm(2, "braidgone0", "fake1");
	struct braid_link lk = { 0 };
	const uint32_t ask[3] = { 0x6f666d71u /* "ofmq" */, 7, 2 }; /* group 7, lane 1 */
	const uint32_t moved_magic = 0x6f666d76u;                   /* "ofmv" */
	uint8_t got[512];
	const uint8_t *mv;
	struct ofi_req *r;
	ssize_t n;
	int sv[2];

	(void)state;
	set_env("2000", "100");
	unit_log_reset();
	devs[0].is_iface = 1; /* an interface at init, deleted since: down here */
	c->link = &lk;
	ofi_move_attach(c);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	braid_oob_chan_init(&lk.chan, sv[0]);
	assert_int_equal(braid_pool_init(&c->reqs, OFI_RECV_REQ_SIZE(2), 4, -1), 0);
	r = braid_pool_get(&c->reqs);
	assert_non_null(r);
	memset(r, 0, OFI_RECV_REQ_SIZE(2)); /* the pool hands out poisoned memory */
	r->magic = BRAID_MAGIC_REQ;
	r->lanes = 3;
	r->n = 1;
	ofi_req_recv(r)->rl[0].ann.seq = ofi_req_recv(r)->rl[1].ann.seq = 7;
	ofi_req_recv(r)->rl[1].ann.n = 1;
	c->seq = 8; /* group 7 posted and in flight */
	lk.on_msg(lk.msg_arg, ask, sizeof(ask));
	assert_int_equal(c->error, ncclSuccess);
	assert_int_equal(r->moved, 0);
	n = read(sv[1], got, sizeof(got));
	mv = n > 0 ? memmem(got, (size_t)n, &moved_magic, sizeof(moved_magic)) : NULL;
	assert_non_null(mv); /* the link's frame, then { "ofmv", group, from, via, ok, ... } */
	assert_int_equal(mv[4], 7);  /* group 7 (little-endian) */
	assert_int_equal(mv[8], 1);  /* from lane 1 */
	assert_int_equal(mv[10], 0); /* refused */
	braid_pool_fini(&c->reqs);
	close(sv[0]);
	close(sv[1]);
	free(c);
}

/* A request whose posting failed on one lane after the others had taken their part
 * (isend/irecv, ofi_data.c): it leaves every lane's backlog, where the device's progress
 * would post it from the pool after it was handed out again, and it is held (kept in use
 * until the comm closes, where it is cancelled) only while a lane has some of it with the
 * provider. Before, isend put it back in the pool in every case, irecv whenever lane 0
 * had not posted it. */
static void failed_post_leaves_every_backlog(void **state)
{
	struct ofi_comm *c = fake_comm(2, "fake0", "fake1");
	struct ofi_req other = { 0 }, r = { 0 };

	(void)state;
	ofi_lane_defer(&c->lane[0], &other);
	ofi_lane_defer(&c->lane[0], &r);
	ofi_lane_defer(&c->lane[1], &r);
	assert_int_equal(ofi_req_unpost(c, &r), 0);
	assert_int_equal(c->lane[0].backlog_tail - c->lane[0].backlog_head, 1);
	assert_ptr_equal(c->lane[0].backlog[c->lane[0].backlog_head % OFI_BACKLOG], &other);
	assert_int_equal(ofi_lane_backlogged(&c->lane[1]), 0);
	assert_ptr_equal(devs[1].deferred, NULL); /* lane 1 is off its device's list */
	assert_ptr_equal(devs[0].deferred, &c->lane[0]);
	r.l[0].pending = 1; /* lane 0's part is with the provider */
	assert_int_equal(ofi_req_unpost(c, &r), 1);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sender_takes_moved_parts),
		cmocka_unit_test(receiver_ignores_an_ask_for_a_completed_group),
		cmocka_unit_test(receiver_skips_an_ask_for_a_lane_it_moved),
		cmocka_unit_test(sender_asks_for_an_announced_lane_down_here),
		cmocka_unit_test(failed_post_leaves_every_backlog),
		cmocka_unit_test(receiver_refuses_a_move_onto_a_lane_down_here),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
