// SPDX-License-Identifier: Apache-2.0
/*
 * The multi-rail striping policy: exact cuts (sums, alignment, min_chunk), where small
 * messages go, and, on a fake clock with each lane a FIFO server at its own rate, that
 * adaptive weights follow the lanes' real rates and the slow-lane warning is right.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "plugin/stripe.h"
#include "tests/unit/unit.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define R 10e9 /* a lane's rate in the simulations, bytes/s */

static double absd(double v)
{
	return v < 0 ? -v : v;
}

static void assert_near(double got, double want, double tol)
{
	if (absd(got - want) > tol)
		fail_msg("%g is not within %g of %g", got, tol, want);
}

/*
 * Every rule of a cut that holds whatever the weights: the parts sum to size (lanes past
 * the comm's untouched), each
 * boundary but the end is a multiple of align, the return value counts the parts and
 * *first_lane is the first; a message split in several parts has none under min_chunk,
 * at most size / min_chunk of them, and only from the threshold up. Returns the count.
 */
static int checked_split(struct braid_stripe *st, size_t size, size_t len[BRAID_STRIPE_MAX_LANES])
{
	int first = -7, parts = 0, ret;
	size_t off = 0;

	for (int i = 0; i < BRAID_STRIPE_MAX_LANES; i++)
		len[i] = (size_t)0x5eed + (size_t)i; /* lanes past nlanes: not written */
	ret = braid_stripe_split(st, size, len, &first);
	assert_in_range(first, 0, st->nlanes - 1);
	for (int i = 0; i < BRAID_STRIPE_MAX_LANES; i++) {
		if (i >= st->nlanes) {
			assert_int_equal(len[i], (size_t)0x5eed + (size_t)i);
			continue;
		}
		if (!len[i])
			continue;
		if (!parts)
			assert_int_equal(first, i);
		if (off)
			assert_int_equal(off % st->cfg.align, 0);
		off += len[i];
		parts++;
	}
	assert_int_equal(off, size);
	if (!size) {
		assert_int_equal(ret, 1);
		return ret;
	}
	assert_int_equal(ret, parts);
	if (parts > 1) {
		assert_true(size >= st->cfg.threshold);
		assert_true((size_t)parts <= size / st->cfg.min_chunk);
		for (int i = 0; i < st->nlanes; i++)
			assert_true(!len[i] || len[i] >= st->cfg.min_chunk);
	}
	return ret;
}

/* Guards the cut's arithmetic: sums, alignment, min_chunk and the part count, for the
 * awkward sizes (0, 1, align-1, threshold-1, primes, not divisible by the lane count,
 * 1 GiB), 1 to 4 lanes, both modes, skewed and unknown speeds, odd configurations (an
 * align that is not a power of two, a min_chunk that is not a multiple of align). */
static void split_sums_and_alignment(void **state)
{
	static const int speeds[][BRAID_STRIPE_MAX_LANES] = { { 0, 0, 0, 0 },
							      { 100, 25, 50, 10 },
							      { 400, 400, 400, 400 },
							      { 1000, 1, 1000, 1 } };
	struct braid_stripe_cfg cfgs[4];
	size_t len[BRAID_STRIPE_MAX_LANES];
	int splits = 0;

	(void)state;
	braid_stripe_cfg_default(&cfgs[0]);
	cfgs[1] = (struct braid_stripe_cfg){ .threshold = 1, .min_chunk = 1, .align = 1 };
	cfgs[2] = (struct braid_stripe_cfg){ .threshold = 10000, .min_chunk = 5000, .align = 4096 };
	cfgs[3] = (struct braid_stripe_cfg){ .threshold = 0, .min_chunk = 7, .align = 3 };
	for (int c = 0; c < 4; c++) {
		for (int mode = 0; mode < 2; mode++) {
			for (int nl = 1; nl <= BRAID_STRIPE_MAX_LANES; nl++) {
				for (int s = 0; s < 4; s++) {
					struct braid_stripe st;
					struct braid_stripe_cfg cfg = cfgs[c];
					double wsum = 0;

					cfg.mode = mode;
					assert_int_equal(braid_stripe_init(&st, nl, speeds[s],
									   &cfg),
							 0);
					assert_int_equal(st.cfg.min_chunk % st.cfg.align, 0);
					assert_true(st.cfg.min_chunk >= cfgs[c].min_chunk);
					for (int i = 0; i < nl; i++)
						wsum += braid_stripe_weight(&st, i);
					assert_near(wsum, 1, 1e-9);

					size_t a = st.cfg.align, t = st.cfg.threshold;
					size_t m = st.cfg.min_chunk;
					const size_t sizes[] = {
						0,           1,           a - 1,
						a,           a + 1,       t ? t - 1 : 0,
						t,           t + 1,       2 * m - 1,
						2 * m,       3 * m + 1,   4 * m - 1,
						7919,        104729,      1000003,
						15485863,    3 * MiB + 1, 4 * MiB,
						5 * MiB - 3, GiB - 1,     GiB,
					};
					for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]);
					     k++) {
						checked_split(&st, sizes[k], len);
						splits++;
					}
				}
			}
		}
	}
	assert_true(splits > 1000);
}

/* Guards that a split follows the weights: nominal speeds 100:25 give 80/20 before any
 * measurement, 4 equal lanes 1/4 each, exactly when the sizes allow. */
static void split_follows_weights(void **state)
{
	const int skew[] = { 100000, 25000 }, same[] = { 400, 400, 400, 400 };
	const int half_unknown[] = { 100000, 0 };
	size_t len[BRAID_STRIPE_MAX_LANES];
	struct braid_stripe st;

	(void)state;
	braid_stripe_init(&st, 2, skew, NULL);
	assert_near(braid_stripe_weight(&st, 0), 0.8, 1e-9);
	assert_near(braid_stripe_weight(&st, 1), 0.2, 1e-9);
	assert_int_equal(checked_split(&st, 4 * MiB, len), 2);
	assert_near((double)len[0], 0.8 * 4 * MiB, BRAID_STRIPE_DEF_ALIGN);
	assert_near((double)len[1], 0.2 * 4 * MiB, BRAID_STRIPE_DEF_ALIGN);

	braid_stripe_init(&st, 4, same, NULL);
	assert_int_equal(checked_split(&st, MiB, len), 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(len[i], 256 * KiB);
	/* Not divisible: 1 MiB + 5 pages + 3 bytes; the tail goes to the message end. */
	assert_int_equal(checked_split(&st, MiB + 5 * 4096 + 3, len), 4);
	for (int i = 0; i < 4; i++)
		assert_in_range(len[i], 256 * KiB, 256 * KiB + 2 * 4096 + 3);
	assert_int_equal(len[3] % 4096, 3);

	/* One speed unknown: nominal figures are not compared with guesses, weights equal. */
	braid_stripe_init(&st, 2, half_unknown, NULL);
	assert_near(braid_stripe_weight(&st, 0), 0.5, 1e-9);
}

/* Guards min_chunk: never a part under it, lanes whose share would be under it left out
 * with their share given to the others by weight, never more parts than size/min_chunk. */
static void min_chunk_respected(void **state)
{
	const int same[] = { 400, 400, 400, 400 }, one_slow[] = { 1000, 1000, 1000, 30 };
	size_t len[BRAID_STRIPE_MAX_LANES];
	struct braid_stripe st;

	(void)state;
	braid_stripe_init(&st, 4, same, NULL);
	/* 3 x min_chunk: three parts of exactly min_chunk, not four of 48 KiB. */
	assert_int_equal(checked_split(&st, 3 * 64 * KiB, len), 3);
	int at_min = 0;

	for (int i = 0; i < 4; i++)
		at_min += len[i] == 64 * KiB;
	assert_int_equal(at_min, 3);
	/* Just under 2 x min_chunk: one part, however many lanes. */
	assert_int_equal(checked_split(&st, 128 * KiB - 1, len), 1);
	assert_int_equal(checked_split(&st, 128 * KiB, len), 2);

	/* Lane 3 at 30 of 3030: its weight is the 2% floor, 2% of 1 MiB is under 64 KiB,
	 * so it gets nothing and the others a third each. */
	braid_stripe_init(&st, 4, one_slow, NULL);
	assert_near(braid_stripe_weight(&st, 3), BRAID_STRIPE_WEIGHT_FLOOR, 1e-9);
	assert_int_equal(checked_split(&st, MiB, len), 3);
	assert_int_equal(len[3], 0);
	for (int i = 0; i < 3; i++)
		assert_near((double)len[i], MiB / 3.0, 4096);
	/* 2% of 8 MiB is 164 KiB: then it does get its part, and so stays measured. */
	assert_int_equal(checked_split(&st, 8 * MiB, len), 4);
	assert_near((double)len[3], 0.02 * 8 * MiB, 4096);
}

/* Guards where a small message goes: the lane that would be done with it first (its
 * backlog and the message over its weight); equal idle lanes take turns (a 0-byte message
 * too); equal backlogs go to the heavier lane. */
static void small_to_soonest_done(void **state)
{
	const int skew[] = { 100, 300 };
	size_t len[BRAID_STRIPE_MAX_LANES];
	struct braid_stripe st;
	int first = -1;

	(void)state;
	braid_stripe_init(&st, 3, NULL, NULL);
	for (int k = 0; k < 6; k++) {
		assert_int_equal(checked_split(&st, 1000, len), 1);
		assert_int_equal(len[k % 3], 1000);
	}
	assert_int_equal(braid_stripe_split(&st, 0, len, &first), 1);
	assert_int_equal(first, 0);
	assert_int_equal(braid_stripe_split(&st, 0, len, &first), 1);
	assert_int_equal(first, 1);

	/* Lane 0 and 2 busy: lane 1, whoever's turn it is, as long as it has the least. */
	braid_stripe_posted(&st, 0, 100 * KiB, 0);
	braid_stripe_posted(&st, 2, 50 * KiB, 0);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(braid_stripe_split(&st, 4 * KiB, len, &first), 1);
		assert_int_equal(first, 1);
		braid_stripe_posted(&st, 1, 4 * KiB, 0);
	}
	braid_stripe_posted(&st, 1, 40 * KiB, 0); /* 52 KiB: now lane 2 has the least */
	assert_int_equal(braid_stripe_split(&st, 4 * KiB, len, &first), 1);
	assert_int_equal(first, 2);

	/* Idle lanes take turns whatever their weights (each stays measured). */
	braid_stripe_init(&st, 2, skew, NULL);
	for (int k = 0; k < 4; k++) {
		assert_int_equal(braid_stripe_split(&st, 100, len, &first), 1);
		assert_int_equal(first, k % 2);
	}
	/* Equal backlogs, unequal weights: the lane that drains them sooner. */
	braid_stripe_init(&st, 2, skew, NULL);
	braid_stripe_posted(&st, 0, 8 * KiB, 0);
	braid_stripe_posted(&st, 1, 8 * KiB, 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(braid_stripe_split(&st, 100, len, &first), 1);
		assert_int_equal(first, 1);
	}
	/* A window of messages posted at once, unequal weights (4:1): each goes where it
	 * would be done first, so the lanes' backlogs stay in their weights' ratio (13 and
	 * 3 of 16). Fewest bytes outstanding alone alternated (8 and 8): on R + R/4 the
	 * window then ended at twice the slow lane's time, half of R alone. */
	{
		const int four_to_one[] = { 400, 100 };
		int on[2] = { 0, 0 };

		braid_stripe_init(&st, 2, four_to_one, NULL);
		for (int k = 0; k < 16; k++) {
			assert_int_equal(checked_split(&st, 64 * KiB, len), 1);
			first = len[0] ? 0 : 1;
			on[first]++;
			braid_stripe_posted(&st, first, 64 * KiB, 0);
		}
		assert_int_equal(on[0], 13);
		assert_int_equal(on[1], 3);
	}
	/* Held bytes (a grouped receive's earlier buffers) steer the next pick like posted
	 * ones, and letting them go leaves the lane as it was: no post, no busy time. */
	braid_stripe_init(&st, 2, NULL, NULL);
	braid_stripe_hold(&st, 0, 64 * KiB);
	braid_stripe_hold(&st, 7, 64 * KiB); /* out of range: ignored */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(braid_stripe_split(&st, 100, len, &first), 1);
		assert_int_equal(first, 1);
	}
	braid_stripe_hold(&st, 0, -64 * KiB);
	assert_int_equal(st.lane[0].outstanding, 0);
	assert_int_equal(st.lane[0].chunks_posted, 0);
	assert_int_equal(st.lane[0].bytes_posted, 0);
	/* Under the threshold on any lane count, over it with one lane: whole. */
	braid_stripe_init(&st, 1, NULL, NULL);
	assert_int_equal(checked_split(&st, GiB, len), 1);
	assert_int_equal(len[0], GiB);
}

/* Guards equal mode: equal parts whatever the speeds and the measured rates. */
static void equal_mode_splits_evenly(void **state)
{
	const int skew[] = { 100000, 25000, 50000 };
	struct braid_stripe_cfg cfg;
	size_t len[BRAID_STRIPE_MAX_LANES];
	struct braid_stripe st;

	(void)state;
	braid_stripe_cfg_default(&cfg);
	cfg.mode = BRAID_STRIPE_EQUAL;
	braid_stripe_init(&st, 3, skew, &cfg);
	/* Different rates measured: lane 1 at a quarter of the others. */
	for (uint64_t t = 0; t < 10; t++) {
		for (int i = 0; i < 3; i++) {
			braid_stripe_posted(&st, i, MiB, t * 1000000);
			braid_stripe_completed(&st, i, MiB,
					       t * 1000000 + (i == 1 ? 400000 : 100000));
		}
	}
	assert_near(braid_stripe_rate(&st, 0), MiB / 100e-6, 1);
	assert_near(braid_stripe_rate(&st, 1), MiB / 400e-6, 1);
	for (int i = 0; i < 3; i++)
		assert_near(braid_stripe_weight(&st, i), 1 / 3.0, 1e-9);
	assert_int_equal(checked_split(&st, 3 * MiB, len), 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(len[i], MiB);
	assert_int_equal(checked_split(&st, 3 * MiB + 4096 + 1, len), 3);
	for (int i = 0; i < 3; i++)
		assert_in_range(len[i], MiB, MiB + 4096 + 1);
}

/* ---- simulation: each lane a FIFO server at its own rate, on a fake clock ---- */

#define SIM_INFLIGHT 8
#define SIM_QUEUE 16

struct sim_chunk {
	uint64_t done; /* when the server finishes it */
	size_t bytes;
	int msg; /* slot of its message */
};

struct sim_lane {
	double bps;
	uint64_t free_at; /* when the server has finished everything queued */
	struct sim_chunk q[SIM_QUEUE];
	int head, n;
};

struct sim {
	struct braid_stripe st;
	/* NULL: st cuts. Else the side that cuts (follow mode, net_ofi's receiver): it gets
	 * st's weights on the wire whenever they moved, as the sender sends them. */
	struct braid_stripe *cut;
	uint64_t wire_sent;
	int wires;
	struct sim_lane lane[BRAID_STRIPE_MAX_LANES];
	uint64_t now;
	int parts_left[SIM_INFLIGHT]; /* per message slot: chunks not completed, 0 free */
	int slow_fired[BRAID_STRIPE_MAX_LANES];
	double slow_rate, slow_others;
	/* each lane's NIC: bytes over all comms (braid_stripe_nic_bytes), the other comms'
	 * part at bg_bps */
	uint64_t nic[BRAID_STRIPE_MAX_LANES];
	double bg_bps[BRAID_STRIPE_MAX_LANES];
};

/* speeds: the nominal speeds the lanes start from (NULL unknown), right or wrong. */
static void sim_init(struct sim *s, int nl, const double *bps, const int *speeds, int mode)
{
	struct braid_stripe_cfg cfg;

	memset(s, 0, sizeof(*s));
	braid_stripe_cfg_default(&cfg);
	cfg.mode = mode;
	assert_int_equal(braid_stripe_init(&s->st, nl, speeds, &cfg), 0);
	for (int i = 0; i < nl; i++)
		s->lane[i].bps = bps[i];
}

/* After every completion, as a backend would: ask for a slow lane, count the answers. */
static void sim_poll_slow(struct sim *s)
{
	double rate, others;
	int lane = braid_stripe_slow_lane(&s->st, &rate, &others);

	if (lane >= 0) {
		s->slow_fired[lane]++;
		s->slow_rate = rate;
		s->slow_others = others;
	}
}

static void sim_post(struct sim *s, int slot, size_t size)
{
	size_t len[BRAID_STRIPE_MAX_LANES];
	int first;

	s->parts_left[slot] = braid_stripe_split(s->cut ? s->cut : &s->st, size, len, &first);
	for (int i = 0; i < s->st.nlanes; i++) {
		struct sim_lane *l = &s->lane[i];
		struct sim_chunk *c;

		if (!len[i])
			continue;
		assert_true(l->n < SIM_QUEUE);
		c = &l->q[(l->head + l->n++) % SIM_QUEUE];
		c->bytes = len[i];
		c->msg = slot;
		c->done = (l->free_at > s->now ? l->free_at : s->now) +
			  (uint64_t)((double)len[i] * 1e9 / l->bps + 0.5);
		l->free_at = c->done;
		braid_stripe_posted(&s->st, i, len[i], s->now);
	}
}

/* Messages of size back to back, at most SIM_INFLIGHT at once; returns the throughput in
 * bytes/s over the messages after the first warm ones. */
static double sim_run(struct sim *s, int nmsg, int warm, size_t size)
{
	int posted = 0, done = 0, inflight = 0;
	uint64_t t_warm = 0;

	while (done < nmsg) {
		int lane = -1;

		if (posted < nmsg && inflight < SIM_INFLIGHT) {
			int slot = 0;

			while (s->parts_left[slot])
				slot++;
			sim_post(s, slot, size);
			posted++;
			inflight++;
			continue;
		}
		for (int i = 0; i < s->st.nlanes; i++) {
			const struct sim_lane *l = &s->lane[i];

			if (l->n && (lane < 0 ||
				     l->q[l->head].done < s->lane[lane].q[s->lane[lane].head].done))
				lane = i;
		}
		assert_true(lane >= 0);
		struct sim_lane *l = &s->lane[lane];
		struct sim_chunk c = l->q[l->head];

		for (int i = 0; i < s->st.nlanes; i++) /* the other comms' bytes till then */
			s->nic[i] += (uint64_t)(s->bg_bps[i] * (double)(c.done - s->now) / 1e9);

		l->head = (l->head + 1) % SIM_QUEUE;
		l->n--;
		s->now = c.done;
		s->nic[lane] += c.bytes;
		braid_stripe_completed(&s->st, lane, c.bytes, s->now);
		sim_poll_slow(s);
		if (s->cut &&
		    braid_stripe_wire_moved(s->wire_sent, braid_stripe_weights_wire(&s->st),
					    s->st.nlanes)) {
			s->wire_sent = braid_stripe_weights_wire(&s->st);
			assert_int_equal(braid_stripe_follow(s->cut, s->wire_sent), 0);
			s->wires++;
		}
		if (--s->parts_left[c.msg] == 0) {
			inflight--;
			if (++done == warm)
				t_warm = s->now;
		}
	}
	return (double)(nmsg - warm) * (double)size * 1e9 / (double)(s->now - t_warm);
}

/* Guards the adaptive policy end to end: lanes at R and R/4 must converge to 80/20 (so a
 * message takes size / 1.25R), each lane's busy-time rate must be its server's rate even
 * though lane 1 gets a quarter of lane 0's share, and the R/4 lane is named slow exactly
 * once with the right rates. Equal mode on the same lanes is held to the slow lane: 0.5R. */
static void sim_fast_and_quarter(void **state)
{
	const double bps[] = { R, R / 4 };
	static struct sim s;
	double adaptive, equal;

	(void)state;
	sim_init(&s, 2, bps, NULL, BRAID_STRIPE_ADAPTIVE);
	adaptive = sim_run(&s, 2000, 200, 4 * MiB);
	assert_near(braid_stripe_weight(&s.st, 0), 0.8, 0.05);
	assert_near(braid_stripe_weight(&s.st, 1), 0.2, 0.05);
	assert_near(braid_stripe_rate(&s.st, 0), R, 0.02 * R);
	assert_near(braid_stripe_rate(&s.st, 1), R / 4, 0.02 * R / 4);
	assert_true(adaptive >= 0.85 * 1.25 * R);
	assert_int_equal(s.slow_fired[0], 0);
	assert_int_equal(s.slow_fired[1], 1);
	assert_near(s.slow_rate, R / 4, 0.05 * R / 4);
	assert_near(s.slow_others, R, 0.05 * R);
	print_message("stripe sim R + R/4, adaptive: %.3f R (ideal 1.25 R), weights %.3f/%.3f\n",
		      adaptive / R, braid_stripe_weight(&s.st, 0), braid_stripe_weight(&s.st, 1));

	sim_init(&s, 2, bps, NULL, BRAID_STRIPE_EQUAL);
	equal = sim_run(&s, 2000, 200, 4 * MiB);
	assert_near(equal, 0.5 * R, 0.05 * R);
	assert_near(braid_stripe_weight(&s.st, 1), 0.5, 1e-9);
	assert_int_equal(s.slow_fired[0], 0);
	assert_int_equal(s.slow_fired[1], 1);
	print_message("stripe sim R + R/4, equal:    %.3f R (ideal 0.5 R)\n", equal / R);
}

/*
 * Two comms share a fused device's NICs (NCCL's channels do), and their adaptive weights
 * can settle on opposite splits: each NIC busy with the other comm's larger share. This
 * comm then measures NIC 1 at a quarter of NIC 0 although both NICs carry as much (the
 * other comm's 3/4 R on NIC 1): NIC 1 is shared, not slow, and is not named. The same
 * lanes with nothing else on NIC 1 (a NIC truly at R/4) are named once, as before; in
 * equal mode a comm's bytes say nothing of a NIC's speed, so its rate alone decides.
 */
static void shared_nic_is_not_slow(void **state)
{
	const double bps[] = { R, R / 4 };
	static struct sim s;

	(void)state;
	sim_init(&s, 2, bps, NULL, BRAID_STRIPE_ADAPTIVE);
	s.bg_bps[1] = 0.75 * R;
	for (int i = 0; i < 2; i++)
		braid_stripe_nic_bytes(&s.st, i, &s.nic[i]);
	sim_run(&s, 2000, 200, 4 * MiB);
	assert_near(braid_stripe_weight(&s.st, 1), 0.2, 0.05); /* it still adapts */
	assert_int_equal(s.slow_fired[0], 0);
	assert_int_equal(s.slow_fired[1], 0);

	sim_init(&s, 2, bps, NULL, BRAID_STRIPE_ADAPTIVE);
	for (int i = 0; i < 2; i++)
		braid_stripe_nic_bytes(&s.st, i, &s.nic[i]);
	sim_run(&s, 2000, 200, 4 * MiB);
	assert_int_equal(s.slow_fired[0], 0);
	assert_int_equal(s.slow_fired[1], 1);
	assert_near(s.slow_rate, R / 4, 0.05 * R / 4);

	sim_init(&s, 2, bps, NULL, BRAID_STRIPE_EQUAL);
	s.bg_bps[1] = 0.75 * R;
	for (int i = 0; i < 2; i++)
		braid_stripe_nic_bytes(&s.st, i, &s.nic[i]);
	sim_run(&s, 2000, 200, 4 * MiB);
	assert_int_equal(s.slow_fired[1], 1);
}

/*
 * net_ofi's shape: the receiver cuts, in follow mode, by the weights the sender measured
 * and sent when they moved. On lanes at R and R/4 the follower's cut must converge to
 * 80/20 and the pair to 1.25 R (>= 0.85 x), as when the sender cuts itself, with few
 * messages (weights move in steps of at least 1%); the follower's own measurements never
 * move its weights.
 */
static void sim_follow_sender(void **state)
{
	const double bps[] = { R, R / 4 };
	static struct sim s;
	static struct braid_stripe cut;
	struct braid_stripe_cfg cfg;
	double tput;

	(void)state;
	sim_init(&s, 2, bps, NULL, BRAID_STRIPE_ADAPTIVE);
	braid_stripe_cfg_default(&cfg);
	cfg.mode = BRAID_STRIPE_FOLLOW;
	assert_int_equal(braid_stripe_init(&cut, 2, NULL, &cfg), 0);
	assert_near(braid_stripe_weight(&cut, 0), 0.5, 1e-9);
	s.cut = &cut;
	tput = sim_run(&s, 2000, 200, 4 * MiB);
	assert_near(braid_stripe_weight(&cut, 0), 0.8, 0.05);
	assert_near(braid_stripe_weight(&cut, 1), 0.2, 0.05);
	assert_true(tput >= 0.85 * 1.25 * R);
	assert_in_range(s.wires, 1, 200);
	print_message("stripe sim R + R/4, receiver follows the sender: %.3f R, weights "
		      "%.3f/%.3f, %d weight messages for 2000 messages\n",
		      tput / R, braid_stripe_weight(&cut, 0), braid_stripe_weight(&cut, 1),
		      s.wires);

	/* its own completions (a receiver's) fold rates but never its weights */
	for (int i = 0; i < 64; i++) {
		braid_stripe_posted(&cut, 1, MiB, (uint64_t)i * 1000000);
		braid_stripe_completed(&cut, 1, MiB, (uint64_t)i * 1000000 + 10000);
	}
	assert_true(braid_stripe_rate(&cut, 1) > 0);
	assert_near(braid_stripe_weight(&cut, 1), 0.2, 0.05);
}

/* The wire form: a round trip within 1/65535, the hysteresis, and every form a follower
 * must refuse (all zero, a lane it does not have) leaves its weights as they were. */
static void weights_wire(void **state)
{
	struct braid_stripe a, b;
	struct braid_stripe_cfg cfg;
	uint64_t w;

	(void)state;
	braid_stripe_cfg_default(&cfg);
	cfg.mode = BRAID_STRIPE_FOLLOW;
	assert_int_equal(braid_stripe_init(&b, 3, NULL, &cfg), 0);
	assert_int_equal(braid_stripe_init(&a, 3, (const int[]){ 400, 200, 200 }, NULL), 0);
	w = braid_stripe_weights_wire(&a);
	assert_int_equal(w >> 48, 0);
	assert_int_equal(braid_stripe_follow(&b, w), 0);
	for (int i = 0; i < 3; i++)
		assert_near(braid_stripe_weight(&b, i), braid_stripe_weight(&a, i), 2.0 / 65535);
	assert_near(braid_stripe_weight(&b, 0), 0.5, 1e-4);

	assert_false(braid_stripe_wire_moved(w, w, 3));
	assert_false(braid_stripe_wire_moved(w, w + BRAID_STRIPE_WIRE_HYSTERESIS - 1, 3));
	assert_true(braid_stripe_wire_moved(w, w + BRAID_STRIPE_WIRE_HYSTERESIS, 3));
	assert_true(
		braid_stripe_wire_moved(w, w - ((uint64_t)BRAID_STRIPE_WIRE_HYSTERESIS << 32), 3));

	assert_true(braid_stripe_wire_valid(w, 3));
	assert_false(braid_stripe_wire_valid(w, 2)); /* lane 2 has a weight */
	assert_false(braid_stripe_wire_valid(0, 3));
	assert_false(braid_stripe_wire_valid(w | (1ULL << 48), 3));
	assert_true(braid_stripe_wire_valid(~0ULL, 4));
	assert_int_equal(braid_stripe_follow(&b, 0), -EINVAL);
	assert_int_equal(braid_stripe_follow(&b, w | (1ULL << 48)), -EINVAL);
	assert_near(braid_stripe_weight(&b, 0), 0.5, 1e-4);
	/* lane 2 at 0 is a lane left out, not garbage */
	assert_int_equal(braid_stripe_follow(&b, 0x0000000100030000ULL >> 16), 0);
	assert_near(braid_stripe_weight(&b, 0), 0.75, 1e-9);
	assert_near(braid_stripe_weight(&b, 2), 0, 1e-9);
}

/* 5 to 8 lanes (NCCL v12's devices of up to 8 NICs): weights in 1/255, 8 bits a lane; a
 * round trip within 1/255, the same 1% hysteresis, and what a follower must refuse. */
static void weights_wire_8(void **state)
{
	static const int speeds[8] = { 800, 100, 100, 100, 100, 100, 100, 100 };
	struct braid_stripe a, b, c7;
	struct braid_stripe_cfg cfg;
	uint64_t w;

	(void)state;
	braid_stripe_cfg_default(&cfg);
	cfg.mode = BRAID_STRIPE_FOLLOW;
	assert_int_equal(braid_stripe_init(&b, 8, NULL, &cfg), 0);
	assert_int_equal(braid_stripe_init(&c7, 7, NULL, &cfg), 0);
	assert_int_equal(braid_stripe_init(&a, 8, speeds, NULL), 0);
	w = braid_stripe_weights_wire(&a);
	assert_int_equal(w & 0xff, 136); /* 800 / 1500 of 255, rounded */
	assert_int_equal(braid_stripe_follow(&b, w), 0);
	for (int i = 0; i < 8; i++)
		assert_near(braid_stripe_weight(&b, i), braid_stripe_weight(&a, i), 2.0 / 255);
	assert_false(braid_stripe_wire_moved(w, w + 2, 8)); /* under 1 %: 3/255 */
	assert_true(braid_stripe_wire_moved(w, w + 3, 8));
	assert_true(braid_stripe_wire_moved(w, w + (3ULL << 56), 8));
	assert_true(braid_stripe_wire_valid(w, 8));
	assert_false(braid_stripe_wire_valid(w, 7)); /* lane 7 has a weight */
	assert_int_equal(braid_stripe_follow(&c7, w), -EINVAL);
	assert_true(braid_stripe_wire_valid(w >> 8, 7));
	assert_false(braid_stripe_wire_valid(w, 9));
	assert_int_equal(braid_stripe_init(&a, 9, NULL, NULL), -EINVAL);
}

/* Guards convergence and false alarms with equal lanes: 2 and 4 lanes at R, started from
 * wrong nominal speeds (4:1:1:1), end at equal weights (within 0.02) and nearly n x R,
 * and no lane is ever named slow. */
static void sim_equal_lanes(void **state)
{
	const double bps[] = { R, R, R, R };
	const int wrong[] = { 400, 100, 100, 100 };
	static struct sim s;
	double tput;

	(void)state;
	for (int nl = 2; nl <= 4; nl += 2) {
		sim_init(&s, nl, bps, wrong, BRAID_STRIPE_ADAPTIVE);
		tput = sim_run(&s, 2000, 200, 4 * MiB);
		for (int i = 0; i < nl; i++) {
			assert_near(braid_stripe_weight(&s.st, i), 1.0 / nl, 0.02);
			assert_int_equal(s.slow_fired[i], 0);
		}
		assert_true(tput >= 0.95 * nl * R);
		print_message("stripe sim %d x R, adaptive: %.3f R, weights %.3f %.3f %.3f %.3f\n",
			      nl, tput / R, braid_stripe_weight(&s.st, 0),
			      braid_stripe_weight(&s.st, 1), braid_stripe_weight(&s.st, 2),
			      braid_stripe_weight(&s.st, 3));
	}
}

/*
 * Both lanes are driven directly: each step posts one chunk on each lane at t and
 * completes it when a server at bps[i] would; the next step starts when the later one is
 * done, after gap_ns of idle time.
 */
static void lockstep(struct sim *s, const double *bps, size_t chunk, int steps, uint64_t gap_ns)
{
	for (int k = 0; k < steps; k++) {
		uint64_t end = s->now;

		for (int i = 0; i < s->st.nlanes; i++) {
			uint64_t done = s->now + (uint64_t)((double)chunk * 1e9 / bps[i] + 0.5);

			braid_stripe_posted(&s->st, i, chunk, s->now);
			braid_stripe_completed(&s->st, i, chunk, done);
			sim_poll_slow(s);
			if (done > end)
				end = done;
		}
		s->now = end + gap_ns;
	}
}

/* Guards the busy-time measurement: a lane idle most of the time, or whose chunks wait
 * behind each other, is not slow. Lane 1 gets a burst of 4 x 64 KiB posted at once every
 * 10 ms (the last waits behind three; its goodput over wall time is ~26 MB/s) while lane
 * 0 is kept busy: a rate over wall time or post-to-completion would name it slow. */
static void idle_lane_is_not_slow(void **state)
{
	static struct sim s;

	(void)state;
	sim_init(&s, 2, (const double[]){ R, R }, NULL, BRAID_STRIPE_ADAPTIVE);
	for (int burst = 0; burst < 200; burst++) { /* 2 s */
		uint64_t t = s.now, t1 = s.now;

		/* Lane 0: back to back, 1 MiB chunks, for the 10 ms. */
		while (t < s.now + 10000000) {
			braid_stripe_posted(&s.st, 0, MiB, t);
			t += (uint64_t)(MiB * 1e9 / R);
			braid_stripe_completed(&s.st, 0, MiB, t);
			sim_poll_slow(&s);
		}
		for (int k = 0; k < 4; k++)
			braid_stripe_posted(&s.st, 1, 64 * KiB, s.now);
		for (int k = 0; k < 4; k++) {
			t1 += (uint64_t)(64 * KiB * 1e9 / R);
			braid_stripe_completed(&s.st, 1, 64 * KiB, t1);
			sim_poll_slow(&s);
		}
		s.now = t;
	}
	assert_near(braid_stripe_rate(&s.st, 1), R, 0.02 * R);
	assert_int_equal(s.slow_fired[0] + s.slow_fired[1], 0);
	assert_near(braid_stripe_weight(&s.st, 1), 0.5, 0.02);
}

/*
 * A message under min_chunk goes whole to one lane, and its time is latency, not rate: a
 * 64-byte send that takes 20 us "moves" 3 MB/s. Measured, a burst of them on one lane
 * took its rate to a few MB/s, the first large messages then gave it 2% (the floor), and
 * on lanes that share a CPU (tcp, softverbs) a 2% chunk ends with the message, so the
 * lane never read fast again: a braid perf sweep from 64 B over two identical veth pairs
 * ended 95.6/4.4 (netns-fused.sh). Small messages are no sample; their time stays in the
 * lane's busy time when a measured chunk is outstanding with them.
 */
static void small_messages_are_no_sample(void **state)
{
	struct braid_stripe st;
	uint64_t t = 1000;

	(void)state;
	assert_int_equal(braid_stripe_init(&st, 2, NULL, NULL), 0);
	for (int i = 0; i < 1000; i++) { /* 64 B in 20 us, on lane 1 */
		braid_stripe_posted(&st, 1, 64, t);
		t += 20000;
		braid_stripe_completed(&st, 1, 64, t);
		braid_stripe_reaped(&st);
	}
	assert_true(braid_stripe_rate(&st, 1) == 0); /* not measured */
	assert_near(braid_stripe_weight(&st, 1), 0.5, 1e-9);
	/* a measured chunk with a small message beside it: the lane's whole busy time */
	braid_stripe_posted(&st, 1, 4 * MiB, t);
	braid_stripe_posted(&st, 1, 64, t);
	braid_stripe_completed(&st, 1, 64, t + 1000000);
	braid_stripe_completed(&st, 1, 4 * MiB, t + 4000000);
	braid_stripe_reaped(&st);
	assert_near(braid_stripe_rate(&st, 1), 4 * MiB / 4e-3, 1);
}

/* Guards "sustained" and "once": 40 ms of busy time at R/4 is not reported; 170 ms is,
 * once, with its rate and the other's; more of it is not reported again. */
static void slow_lane_sustained_and_latched(void **state)
{
	const double both[] = { R, R }, quarter[] = { R, R / 4 };
	static struct sim s;

	(void)state;
	sim_init(&s, 2, both, NULL, BRAID_STRIPE_ADAPTIVE);
	lockstep(&s, both, MiB, 50, 0);
	lockstep(&s, quarter, MiB, 95, 0); /* 95 x 0.42 ms = 40 ms busy */
	lockstep(&s, both, MiB, 50, 0);
	assert_int_equal(s.slow_fired[0] + s.slow_fired[1], 0);
	lockstep(&s, quarter, MiB, 400, 0); /* 168 ms */
	assert_int_equal(s.slow_fired[0], 0);
	assert_int_equal(s.slow_fired[1], 1);
	assert_near(s.slow_rate, R / 4, 0.02 * R / 4);
	assert_near(s.slow_others, R, 0.02 * R);
	lockstep(&s, quarter, MiB, 400, 0);
	lockstep(&s, both, MiB, 50, 0);
	lockstep(&s, quarter, MiB, 400, 0);
	assert_int_equal(s.slow_fired[1], 1);
	assert_int_equal(s.slow_fired[0], 0);
}

/* Guards the moving average: one odd sample (a 1 MiB chunk at R/4 on a lane measured at
 * R) moves the rate by a quarter of the difference, not to the odd sample. */
static void one_odd_sample_is_damped(void **state)
{
	const double both[] = { R, R }, quarter[] = { R, R / 4 };
	static struct sim s;

	(void)state;
	sim_init(&s, 2, both, NULL, BRAID_STRIPE_ADAPTIVE);
	lockstep(&s, both, MiB, 20, 0);
	lockstep(&s, quarter, MiB, 1, 0);
	assert_near(braid_stripe_rate(&s.st, 1), R + BRAID_STRIPE_EMA_ALPHA * (R / 4 - R),
		    0.01 * R);
	assert_near(braid_stripe_weight(&s.st, 1), 0.8125 / 1.8125, 0.01);
}

/* Guards the weight floor: a lane at 1% of the other keeps 2%, so it stays measured. */
static void weight_floor(void **state)
{
	static struct sim s;

	(void)state;
	sim_init(&s, 2, (const double[]){ R, R / 100 }, NULL, BRAID_STRIPE_ADAPTIVE);
	lockstep(&s, (const double[]){ R, R / 100 }, MiB, 20, 0);
	assert_near(braid_stripe_rate(&s.st, 1), R / 100, 0.02 * R / 100);
	assert_near(braid_stripe_weight(&s.st, 1), BRAID_STRIPE_WEIGHT_FLOOR, 1e-9);
	assert_near(braid_stripe_weight(&s.st, 0), 1 - BRAID_STRIPE_WEIGHT_FLOOR, 1e-9);
}

/*
 * Guards the probe (docs/multirail.md, "A lane at the floor"): a lane measured at 1% of
 * the other for a moment sits at the 2% floor, under min_chunk of a 1 MiB message, so
 * the cut leaves it out and nothing measures it again. Every BRAID_STRIPE_PROBE_EVERY
 * such cuts it gets a chunk of min_chunk: with both lanes back at R its weight returns
 * to about half and the pair to 2R; on a lane that really is at R/100 the probes cost
 * little (they run beside the other lane's messages) and its weight stays at the floor.
 * The same through a receiver that cuts by the sender's weights (net_ofi's follow mode).
 */
static void floor_lane_is_probed(void **state)
{
	const double both[] = { R, R }, slow[] = { R, R / 100 };
	static struct sim s;
	static struct braid_stripe cut;
	struct braid_stripe_cfg cfg;
	size_t len[BRAID_STRIPE_MAX_LANES];
	int first, probes = 0;
	double bw;

	(void)state;
	sim_init(&s, 2, both, NULL, BRAID_STRIPE_ADAPTIVE);
	lockstep(&s, slow, MiB, 20, 0);
	assert_near(braid_stripe_weight(&s.st, 1), BRAID_STRIPE_WEIGHT_FLOOR, 1e-9);
	/* left out, and probed once in BRAID_STRIPE_PROBE_EVERY cuts, with min_chunk */
	for (int i = 0; i < 4 * BRAID_STRIPE_PROBE_EVERY; i++) {
		int parts = checked_split(&s.st, MiB, len);

		assert_int_equal(parts == 2, len[1] != 0);
		if (len[1]) {
			assert_int_equal(len[1], BRAID_STRIPE_DEF_MIN_CHUNK);
			probes++;
		}
	}
	assert_int_equal(probes, 4);
	/* no probe for messages that cannot be cut in two, nor in equal mode */
	assert_int_equal(braid_stripe_split(&s.st, 64 * KiB, len, &first), 1);

	sim_init(&s, 2, both, NULL, BRAID_STRIPE_ADAPTIVE);
	lockstep(&s, slow, MiB, 20, 0);
	sim_run(&s, 3000, 0, MiB);
	assert_near(braid_stripe_weight(&s.st, 1), 0.5, 0.05);
	bw = sim_run(&s, 500, 50, MiB);
	assert_true(bw >= 0.9 * 2 * R);
	print_message("stripe sim, a lane at the floor back at R: weights %.3f/%.3f, %.3f R\n",
		      braid_stripe_weight(&s.st, 0), braid_stripe_weight(&s.st, 1), bw / R);

	sim_init(&s, 2, slow, NULL, BRAID_STRIPE_ADAPTIVE);
	lockstep(&s, slow, MiB, 20, 0);
	bw = sim_run(&s, 2000, 100, MiB);
	assert_near(braid_stripe_weight(&s.st, 1), BRAID_STRIPE_WEIGHT_FLOOR, 1e-9);
	assert_true(bw >= 0.9 * R);
	print_message("stripe sim, a lane truly at R/100, probed: %.3f R\n", bw / R);

	sim_init(&s, 2, both, NULL, BRAID_STRIPE_ADAPTIVE);
	braid_stripe_cfg_default(&cfg);
	cfg.mode = BRAID_STRIPE_FOLLOW;
	assert_int_equal(braid_stripe_init(&cut, 2, NULL, &cfg), 0);
	lockstep(&s, slow, MiB, 20, 0);
	assert_int_equal(braid_stripe_follow(&cut, braid_stripe_weights_wire(&s.st)), 0);
	s.wire_sent = braid_stripe_weights_wire(&s.st);
	s.cut = &cut;
	assert_near(braid_stripe_weight(&cut, 1), BRAID_STRIPE_WEIGHT_FLOOR, 1e-3);
	sim_run(&s, 3000, 0, MiB);
	assert_near(braid_stripe_weight(&cut, 1), 0.5, 0.05);

	braid_stripe_cfg_default(&cfg);
	cfg.mode = BRAID_STRIPE_EQUAL;
	assert_int_equal(braid_stripe_init(&cut, 2, NULL, &cfg), 0);
	for (int i = 0; i < 4 * BRAID_STRIPE_PROBE_EVERY; i++)
		assert_int_equal(checked_split(&cut, MiB, len), 2);
}

/* Guards determinism (the same state cuts the same way) and the misuse guards. */
static void deterministic_and_misuse(void **state)
{
	const int speeds[] = { 100, 37, 52 };
	size_t len_a[BRAID_STRIPE_MAX_LANES] = { 0 }, len_b[BRAID_STRIPE_MAX_LANES] = { 0 };
	struct braid_stripe a, b;
	int fa, fb;

	(void)state;
	braid_stripe_init(&a, 3, speeds, NULL);
	braid_stripe_posted(&a, 1, 5 * MiB, 10);
	memcpy(&b, &a, sizeof(a));
	for (size_t size = 1; size < 64 * MiB; size = size * 3 + 1) {
		assert_int_equal(braid_stripe_split(&a, size, len_a, &fa),
				 braid_stripe_split(&b, size, len_b, &fb));
		assert_int_equal(fa, fb);
		assert_memory_equal(len_a, len_b, sizeof(len_a));
	}

	assert_int_equal(braid_stripe_init(&a, 0, NULL, NULL), -EINVAL);
	assert_int_equal(a.nlanes, 1);
	assert_int_equal(braid_stripe_init(&a, BRAID_STRIPE_MAX_LANES + 1, NULL, NULL), -EINVAL);
	assert_int_equal(checked_split(&a, 4 * MiB, len_a), 1);
	braid_stripe_posted(&a, 1, MiB, 0);  /* no lane 1: ignored */
	braid_stripe_posted(&a, -1, MiB, 0); /* ignored */
	assert_int_equal(a.lane[1].outstanding, 0);
	braid_stripe_posted(&a, 0, 100, 0);
	braid_stripe_completed(&a, 0, 1000, 1000); /* more than outstanding: what is */
	assert_int_equal(a.lane[0].outstanding, 0);
	assert_int_equal(a.lane[0].bytes_completed, 100);
	assert_near(braid_stripe_weight(&a, 7), 0, 0);
	assert_near(braid_stripe_rate(&a, -1), 0, 0);
}

/*
 * Guards batched reaping: a NIC's CQ is read at test(), so eight chunks that finished one
 * after another are all seen at once. The sample must hold the whole batch: 8 MiB over the
 * 8.4 ms the lane was busy. Reported one by one, the first completion carries all the time
 * and closes a sample of 1 MiB alone (8x too slow), and the rest arrive in no time.
 */
static void batched_reap_reads_true_rate(void **state)
{
	struct braid_stripe_cfg cfg;
	struct braid_stripe st;
	const uint64_t t_end = 8400000; /* ns */

	(void)state;
	braid_stripe_cfg_default(&cfg);
	cfg.batched = 1;
	braid_stripe_init(&st, 2, NULL, &cfg);
	for (int i = 0; i < 8; i++)
		braid_stripe_posted(&st, 0, MiB, 0);
	for (int i = 0; i < 8; i++)
		braid_stripe_completed(&st, 0, MiB, t_end);
	assert_true(braid_stripe_rate(&st, 0) == 0); /* nothing folded before the reap */
	braid_stripe_reaped(&st);
	assert_near(braid_stripe_rate(&st, 0), 8.0 * MiB * 1e9 / (double)t_end,
		    0.01 * 8.0 * MiB * 1e9 / (double)t_end);
	assert_true(braid_stripe_rate(&st, 1) == 0);
}

/* Failover: a lane down gets no part of any message, small or split, in either mode; the
 * others share its weight; with one lane left everything goes whole to it; back up, it
 * takes part again. */
static void lane_down_takes_no_part(void **state)
{
	struct braid_stripe_cfg cfg;
	struct braid_stripe st;
	size_t len[BRAID_STRIPE_MAX_LANES];

	(void)state;
	for (int mode = BRAID_STRIPE_ADAPTIVE; mode <= BRAID_STRIPE_EQUAL; mode++) {
		braid_stripe_cfg_default(&cfg);
		cfg.mode = mode;
		braid_stripe_init(&st, 3, NULL, &cfg);
		braid_stripe_posted(&st, 1, MiB, 0);
		assert_int_equal(braid_stripe_lane_down(&st, 1, 1), 2);
		assert_int_equal(braid_stripe_lane_down(&st, 1, 1), 2); /* twice: no change */
		assert_true(braid_stripe_weight(&st, 1) == 0);
		assert_near(braid_stripe_weight(&st, 0) + braid_stripe_weight(&st, 2), 1, 1e-9);
		for (int i = 0; i < 20; i++) {
			assert_int_equal(checked_split(&st, 4 * MiB, len), 2);
			assert_int_equal(len[1], 0);
			checked_split(&st, 8, len);
			assert_int_equal(len[1], 0);
		}
		assert_int_equal(braid_stripe_lane_down(&st, 0, 1), 1);
		for (int i = 0; i < 5; i++) {
			assert_int_equal(checked_split(&st, 4 * MiB, len), 1);
			assert_int_equal(len[2], 4 * MiB);
			checked_split(&st, 8, len);
			assert_int_equal(len[2], 8);
		}
		assert_int_equal(braid_stripe_lane_down(&st, 1, 0), 2);
		assert_int_equal(braid_stripe_lane_down(&st, 0, 0), 3);
		assert_int_equal(checked_split(&st, 6 * MiB, len), 3);
		assert_int_equal(braid_stripe_lane_down(&st, 9, 1), 3); /* out of range: ignored */
	}
}

/* The pick of a lane for a whole message (braid_stripe_pick; its probe is 64 picks away)
 * among lanes with backlogs: a lane of weight 0 (follow mode: the measuring side gave it
 * none, or it came back up since) is not chosen while a weighted lane is up, a lane down
 * never, even when it is the round robin's turn; and the finish times follow the weights
 * (3:1: the heavy lane takes 3 of every 4). With every lane idle, lanes take turns
 * whatever their weights (small_to_soonest_done). */
static void pick_by_weight_not_zero_not_down(void **state)
{
	struct braid_stripe_cfg cfg;
	struct braid_stripe st;
	int on[3] = { 0, 0, 0 };

	(void)state;
	braid_stripe_cfg_default(&cfg);
	cfg.mode = BRAID_STRIPE_FOLLOW;
	braid_stripe_init(&st, 3, NULL, &cfg);
	/* wire form, 16 bits a lane: lane 0 3/4, lane 1 none, lane 2 1/4 */
	assert_int_equal(braid_stripe_follow(&st, 3ull | 1ull << 32), 0);
	for (int i = 0; i < 3; i++)
		braid_stripe_posted(&st, i, MiB, 0);
	for (int k = 0; k < 40; k++) {
		int lane = braid_stripe_pick(&st, MiB);

		assert_true(lane == 0 || lane == 2);
		on[lane]++;
		braid_stripe_posted(&st, lane, MiB, 0);
	}
	/* each went where it finished first: the two backlogs' finish times end within one
	 * message of each other (32 MiB at 3/4, 10 MiB at 1/4) */
	assert_int_equal(on[1], 0);
	assert_int_equal(on[0], 31);
	assert_int_equal(on[2], 9);

	/* follow mode, lane 0 down and back up: weight 0 until the other side's next weights
	 * (its inverse too), so with backlogs it is not picked */
	braid_stripe_lane_down(&st, 0, 1);
	braid_stripe_lane_down(&st, 0, 0);
	braid_stripe_posted(&st, 0, MiB, 0);
	for (int k = 0; k < 8; k++) {
		int lane = braid_stripe_pick(&st, MiB);

		assert_int_equal(lane, 2);
		braid_stripe_posted(&st, lane, MiB, 0);
	}

	/* adaptive, lane 1 down and every turn tried as the start */
	braid_stripe_init(&st, 3, NULL, NULL);
	braid_stripe_lane_down(&st, 1, 1);
	for (int k = 0; k < 9; k++) {
		int lane;

		st.rr = k % 3;
		lane = braid_stripe_pick(&st, MiB);
		assert_true(lane == 0 || lane == 2);
		braid_stripe_posted(&st, lane, MiB, 0);
	}
}

/* Recovery: a lane back up takes the weight its measured rate gave it before it went down
 * (not an equal share it must earn back from scratch), and while down its old rate is no
 * yardstick for the others' slowness. */
static void lane_back_up_keeps_its_rate(void **state)
{
	struct braid_stripe st;
	double rate0, rate1;

	(void)state;
	braid_stripe_init(&st, 2, NULL, NULL);
	for (uint64_t t = 0; t < 10; t++) {
		braid_stripe_posted(&st, 0, MiB, t * 1000000);
		braid_stripe_posted(&st, 1, MiB, t * 1000000);
		braid_stripe_completed(&st, 0, MiB, t * 1000000 + 100000);
		braid_stripe_completed(&st, 1, MiB, t * 1000000 + 300000);
		braid_stripe_reaped(&st);
	}
	rate0 = braid_stripe_rate(&st, 0);
	rate1 = braid_stripe_rate(&st, 1);
	assert_near(braid_stripe_weight(&st, 1), rate1 / (rate0 + rate1), 1e-6);
	braid_stripe_posted(&st, 1, MiB, 20000000); /* never completes: it goes down */
	assert_int_equal(braid_stripe_lane_down(&st, 1, 1), 1);
	assert_true(braid_stripe_weight(&st, 1) == 0);
	assert_int_equal(braid_stripe_lane_down(&st, 1, 0), 2);
	assert_near(braid_stripe_rate(&st, 1), rate1, 1e-6);
	assert_near(braid_stripe_weight(&st, 1), rate1 / (rate0 + rate1), 1e-6);
	assert_near(braid_stripe_weight(&st, 0), rate0 / (rate0 + rate1), 1e-6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(split_sums_and_alignment),
		cmocka_unit_test(split_follows_weights),
		cmocka_unit_test(min_chunk_respected),
		cmocka_unit_test(small_to_soonest_done),
		cmocka_unit_test(equal_mode_splits_evenly),
		cmocka_unit_test(sim_fast_and_quarter),
		cmocka_unit_test(shared_nic_is_not_slow),
		cmocka_unit_test(sim_equal_lanes),
		cmocka_unit_test(sim_follow_sender),
		cmocka_unit_test(weights_wire),
		cmocka_unit_test(weights_wire_8),
		cmocka_unit_test(idle_lane_is_not_slow),
		cmocka_unit_test(small_messages_are_no_sample),
		cmocka_unit_test(slow_lane_sustained_and_latched),
		cmocka_unit_test(one_odd_sample_is_damped),
		cmocka_unit_test(weight_floor),
		cmocka_unit_test(floor_lane_is_probed),
		cmocka_unit_test(deterministic_and_misuse),
		cmocka_unit_test(batched_reap_reads_true_rate),
		cmocka_unit_test(lane_down_takes_no_part),
		cmocka_unit_test(pick_by_weight_not_zero_not_down),
		cmocka_unit_test(lane_back_up_keeps_its_rate),
	};

	return cmocka_run_group_tests_name("stripe", tests, NULL, NULL);
}
