// SPDX-License-Identifier: Apache-2.0
/*
 * One NIC's QPs as striping lanes (braid_stripe_cfg_qps, as net_ib sets up a rail with
 * several QPs): the cut NCCL made (every QP an equal part above BRAID_IB_SPLIT_BYTES) is
 * what equal weights give, the parts always sum to the message on 128-byte boundaries, and
 * on a fake clock with each QP a FIFO server at its ECMP path's rate a QP on a path at a
 * quarter of the others' rate is given fewer bytes, so a message no longer waits for it.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "plugin/stripe.h"
#include "tests/unit/unit.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define SPLIT (64 * KiB) /* BRAID_IB_SPLIT_BYTES' default */
#define NQ 4
#define R 10e9 /* a fast QP path, bytes/s */
#define INFLIGHT 8

static void qp_lanes(struct braid_stripe *st, size_t split, int mode)
{
	struct braid_stripe_cfg cfg;

	braid_stripe_cfg_qps(&cfg, split, NQ);
	cfg.mode = mode;
	assert_int_equal(braid_stripe_init(st, NQ, NULL, &cfg), 0);
}

/* The rules of every cut: parts sum to size, boundaries but the end on 128 bytes, and a
 * split message has no part under split / NQ. Returns the parts. */
static int cut(struct braid_stripe *st, size_t size, size_t len[BRAID_STRIPE_MAX_LANES])
{
	int first, n = braid_stripe_split(st, size, len, &first), parts = 0;
	size_t off = 0;

	for (int i = 0; i < NQ; i++) {
		if (!len[i])
			continue;
		if (off)
			assert_int_equal(off % 128, 0);
		if (n > 1)
			assert_true(len[i] >= st->cfg.min_chunk);
		off += len[i];
		parts++;
	}
	assert_int_equal(off, size);
	assert_int_equal(parts, n);
	return n;
}

/* Equal weights (BRAID_STRIPE=equal, or adaptive before any measurement) cut as NCCL's
 * IB transport does: at most split_bytes whole on one QP, above it a quarter on each (to
 * the 128-byte unit: the odd units go one each to the first QPs). */
static void equal_is_nccls_cut(void **state)
{
	struct braid_stripe st;
	size_t len[BRAID_STRIPE_MAX_LANES];
	const size_t sizes[] = { SPLIT + 128, 256 * KiB, MiB, 4 * MiB, 3 * MiB + 4096 };

	(void)state;
	for (int mode = BRAID_STRIPE_ADAPTIVE; mode <= BRAID_STRIPE_EQUAL; mode++) {
		qp_lanes(&st, SPLIT, mode);
		assert_int_equal(cut(&st, SPLIT, len), 1);
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			assert_int_equal(cut(&st, sizes[i], len), NQ);
			for (int q = 0; q < NQ; q++) /* equal to a 128-byte unit */
				assert_true(len[q] + 128 > sizes[i] / NQ &&
					    len[q] < sizes[i] / NQ + 128);
		}
	}
	/* NCCL_IB_SPLIT_DATA_ON_QPS=1 (split_bytes 0): 32 KiB is 4 parts of 8 KiB */
	qp_lanes(&st, 0, BRAID_STRIPE_EQUAL);
	assert_int_equal(cut(&st, 32 * KiB, len), NQ);
	for (int q = 0; q < NQ; q++)
		assert_int_equal(len[q], 8 * KiB);
}

struct qsim {
	struct braid_stripe st;
	double bps[NQ];
	uint64_t free_at[NQ];
	uint64_t now;
	/* per message in flight: each QP's part and when it completes (0: none) */
	size_t part[INFLIGHT][NQ];
	uint64_t done[INFLIGHT][NQ];
	uint64_t bytes[NQ]; /* carried after the warm-up */
	/* sampled: each message asks braid_stripe_sample and is accounted as net_ib does
	 * (how[slot]: the answer); else every message is measured */
	int sampled;
	int how[INFLIGHT];
	int measured; /* messages measured (BRAID_STRIPE_MEASURE) */
	/* whole: every message goes whole to braid_stripe_pick's QP (net_ib with every QP
	 * busy); its samples folded every reap_every completions (net_ib: IB_QREAP_EVERY) */
	int whole;
	int reap_every;
	int completions;
	/* inorder: a message is retired (and its slot posted again) only once every message
	 * posted before it is, as NCCL consumes its window; active: messages posted and not
	 * retired (net_ib's inflight, what decides a whole message) */
	int inorder;
	int active;
	int seq[INFLIGHT];
	int finished[INFLIGHT];
};

static void qsim_post(struct qsim *s, int slot, size_t size, int count)
{
	size_t len[BRAID_STRIPE_MAX_LANES] = { 0 };

	int pick = s->whole && s->active >= NQ ? braid_stripe_pick(&s->st, size) : -1;

	if (pick >= 0)
		len[pick] = size;
	else
		cut(&s->st, size, len);
	s->how[slot] = s->sampled ? braid_stripe_sample(&s->st) : BRAID_STRIPE_MEASURE;
	s->measured += s->how[slot] == BRAID_STRIPE_MEASURE;
	for (int q = 0; q < NQ; q++) {
		s->part[slot][q] = len[q];
		s->done[slot][q] = 0;
		if (!len[q])
			continue;
		s->free_at[q] = (s->free_at[q] > s->now ? s->free_at[q] : s->now) +
				(uint64_t)((double)len[q] * 1e9 / s->bps[q] + 0.5);
		s->done[slot][q] = s->free_at[q];
		if (s->how[slot] != BRAID_STRIPE_SKIP)
			braid_stripe_posted(&s->st, q, len[q], s->now);
		if (count)
			s->bytes[q] += len[q];
	}
}

/* nmsg messages of size, INFLIGHT at once, each reposted as soon as it completes; each
 * completion is one CQ read (batched, as net_ib). Bytes/s after the first warm. */
/* The oldest message not yet retired: its slot. */
static int qsim_oldest(const struct qsim *s)
{
	int o = 0;

	for (int i = 1; i < INFLIGHT; i++)
		if (s->seq[i] < s->seq[o])
			o = i;
	return o;
}

static double qsim_run(struct qsim *s, int nmsg, int warm, size_t size)
{
	int posted = 0, done = 0;
	uint64_t t_warm = 0;

	for (int i = 0; i < INFLIGHT; i++) {
		s->active = i;
		s->seq[i] = posted;
		qsim_post(s, i, size, posted++ >= warm);
	}
	s->active = INFLIGHT;
	while (done < nmsg) {
		int slot = -1, q = -1, left = 0;

		for (int i = 0; i < INFLIGHT; i++)
			for (int j = 0; j < NQ; j++)
				if (s->done[i][j] &&
				    (slot < 0 || s->done[i][j] < s->done[slot][q])) {
					slot = i;
					q = j;
				}
		assert_true(slot >= 0);
		s->now = s->done[slot][q];
		s->done[slot][q] = 0;
		if (s->how[slot] == BRAID_STRIPE_MARK) {
			braid_stripe_marked(&s->st, q, s->part[slot][q], s->now);
		} else if (s->how[slot] == BRAID_STRIPE_MEASURE) {
			braid_stripe_completed(&s->st, q, s->part[slot][q], s->now);
			if (++s->completions % (s->reap_every ? s->reap_every : 1) == 0)
				braid_stripe_reaped(&s->st);
		}
		for (int j = 0; j < NQ; j++)
			left += s->done[slot][j] != 0;
		if (left)
			continue;
		s->finished[slot] = 1;
		for (int r = s->inorder ? qsim_oldest(s) : slot; s->finished[r];
		     r = s->inorder ? qsim_oldest(s) : slot) {
			s->finished[r] = 0;
			s->active--;
			if (++done == warm)
				t_warm = s->now;
			if (posted < nmsg) {
				s->seq[r] = posted;
				qsim_post(s, r, size, posted++ >= warm);
				s->active++;
			} else {
				s->seq[r] = INT_MAX;
				for (int j = 0; j < NQ; j++)
					s->part[r][j] = 0;
			}
		}
	}
	return (double)(nmsg - warm) * (double)size * 1e9 / (double)(s->now - t_warm);
}

/* QP 2, on the slow path, carried under half the bytes of any other QP and has under
 * half its weight. */
static void slow_qp_behind(const struct qsim *s)
{
	for (int q = 0; q < NQ; q++) {
		if (q == 2)
			continue;
		assert_true(s->bytes[2] * 2 < s->bytes[q]);
		assert_true(braid_stripe_weight(&s->st, 2) * 2 < braid_stripe_weight(&s->st, q));
	}
}

/* Three QPs on paths at R, one on a path at R / 4 (a congested ECMP link). Adaptive: the
 * slow QP's share follows its rate (1/13 of the bytes, the others 4/13 each) and the
 * connection carries near the paths' sum, 3.25 R. Equal: a quarter each, and the message
 * ends with the slow QP: 4 x R / 4 = R. */
static void slow_qp_gets_fewer_bytes(void **state)
{
	static struct qsim s;
	double bps;

	(void)state;
	for (int mode = BRAID_STRIPE_ADAPTIVE; mode <= BRAID_STRIPE_EQUAL; mode++) {
		memset(&s, 0, sizeof(s));
		qp_lanes(&s.st, SPLIT, mode);
		s.st.cfg.sample = 0; /* every message measured (sampled_slow_qp: sampled) */
		for (int q = 0; q < NQ; q++)
			s.bps[q] = q == 2 ? R / 4 : R;
		bps = qsim_run(&s, 600, 200, MiB);
		printf("qp lanes (%s): %.2f GB/s, bytes per QP %llu %llu %llu %llu\n",
		       mode == BRAID_STRIPE_EQUAL ? "equal" : "adaptive", bps / 1e9,
		       (unsigned long long)s.bytes[0], (unsigned long long)s.bytes[1],
		       (unsigned long long)s.bytes[2], (unsigned long long)s.bytes[3]);
		if (mode == BRAID_STRIPE_EQUAL) {
			for (int q = 0; q < NQ; q++)
				assert_int_equal(s.bytes[q], s.bytes[0]);
			assert_true(bps < 1.05 * R);
			continue;
		}
		slow_qp_behind(&s);
		assert_true(braid_stripe_weight(&s.st, 2) > 0.05 &&
			    braid_stripe_weight(&s.st, 2) < 0.1);
		assert_true(bps > 0.9 * 3.25 * R);
	}
}

/* Every lane of st measured n more times: 1 MiB each in 1 ms, a window each. */
static void warm_lanes(struct braid_stripe *st, int n, uint64_t *now)
{
	for (int k = 0; k < n; k++) {
		for (int q = 0; q < st->nlanes; q++)
			if (!st->lane[q].down)
				braid_stripe_posted(st, q, MiB, *now);
		*now += 1000000;
		for (int q = 0; q < st->nlanes; q++)
			if (!st->lane[q].down)
				braid_stripe_completed(st, q, MiB, *now);
		braid_stripe_reaped(st);
	}
}

/* n answers of braid_stripe_sample in a row are all MEASURE */
static void all_measured(struct braid_stripe *st, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(braid_stripe_sample(st), BRAID_STRIPE_MEASURE);
}

/* Every QP busy, each message sent whole to the QP braid_stripe_pick names (net_ib once a
 * message finds as many in flight as QPs), the window consumed in order as NCCL does: on
 * paths as above (one QP at R/4, then at R/10) the connection carries near the paths' sum
 * with the samples folded every 8 completions. From the first pick on every message is
 * measured (the pick reads each QP's backlog, which sampling would leave out); the slow
 * QP, which 8 messages over 3 fast QPs never make the first to finish, is measured through
 * the message in 64 that the pick has cut by the weights: a small part, no whole message
 * holding the window for its time on the slow path. */
static void whole_messages_follow_rates(void **state)
{
	static struct qsim s;
	const int slow_div[] = { 4, 10 };

	(void)state;
	for (size_t t = 0; t < sizeof(slow_div) / sizeof(slow_div[0]); t++) {
		double bps, paths = 3 * R + R / slow_div[t];

		memset(&s, 0, sizeof(s));
		qp_lanes(&s.st, SPLIT, BRAID_STRIPE_ADAPTIVE);
		s.sampled = 1;
		s.whole = 1;
		s.inorder = 1;
		s.reap_every = 16; /* net_ib's IB_QREAP_EVERY */
		for (int q = 0; q < NQ; q++)
			s.bps[q] = q == 2 ? R / slow_div[t] : R;
		bps = qsim_run(&s, 2000, 400, MiB);
		printf("qp lanes, whole messages, one QP at R/%d: %.2f GB/s of %.2f, bytes per QP "
		       "%llu %llu %llu %llu, %d of 2000 measured\n",
		       slow_div[t], bps / 1e9, paths / 1e9, (unsigned long long)s.bytes[0],
		       (unsigned long long)s.bytes[1], (unsigned long long)s.bytes[2],
		       (unsigned long long)s.bytes[3], s.measured);
		assert_int_equal(s.measured, 2000);
		assert_true(s.bytes[2] > 0); /* measured, through the cut messages */
		slow_qp_behind(&s);
		assert_true(bps > 0.9 * paths);
		all_measured(&s.st, 3 * BRAID_STRIPE_QP_SAMPLE);
	}
}

/* The QP lanes sample: every message is measured until every lane up has
 * BRAID_STRIPE_SAMPLE_WARM samples, then of each BRAID_STRIPE_QP_SAMPLE messages one marks,
 * the next BRAID_STRIPE_QP_SAMPLE_RUN - 1 are measured, the rest are not accounted. A lane
 * back up without its samples (or one that never had any) measures every message again;
 * cfg.sample 0 or 1 is every message, always; a run is 2 messages at least, the period
 * at most. */
static void sample_decision(void **state)
{
	struct braid_stripe st;
	uint64_t now = 1000;

	(void)state;
	qp_lanes(&st, SPLIT, BRAID_STRIPE_ADAPTIVE);
	assert_int_equal(st.cfg.sample, BRAID_STRIPE_QP_SAMPLE);
	all_measured(&st, 3 * BRAID_STRIPE_QP_SAMPLE);
	warm_lanes(&st, BRAID_STRIPE_SAMPLE_WARM - 1, &now);
	all_measured(&st, 3 * BRAID_STRIPE_QP_SAMPLE);
	warm_lanes(&st, 1, &now);
	for (int i = 0; i < 3 * BRAID_STRIPE_QP_SAMPLE; i++) {
		int phase = i % BRAID_STRIPE_QP_SAMPLE;

		assert_int_equal(braid_stripe_sample(&st), phase == 0 ? BRAID_STRIPE_MARK
							   : phase < BRAID_STRIPE_QP_SAMPLE_RUN
								   ? BRAID_STRIPE_MEASURE
								   : BRAID_STRIPE_SKIP);
	}
	/* a lane that fails and comes back keeps its samples: still sampled */
	braid_stripe_lane_down(&st, 1, 1);
	braid_stripe_lane_down(&st, 1, 0);
	assert_int_equal(braid_stripe_sample(&st), BRAID_STRIPE_MARK);

	/* lane 3 down from the start: the others' samples are enough, until it is back */
	qp_lanes(&st, SPLIT, BRAID_STRIPE_ADAPTIVE);
	braid_stripe_lane_down(&st, 3, 1);
	warm_lanes(&st, BRAID_STRIPE_SAMPLE_WARM, &now);
	assert_int_equal(braid_stripe_sample(&st), BRAID_STRIPE_MARK);
	braid_stripe_lane_down(&st, 3, 0);
	all_measured(&st, 3 * BRAID_STRIPE_QP_SAMPLE);

	for (unsigned n = 0; n < 2; n++) {
		struct braid_stripe_cfg cfg;

		braid_stripe_cfg_qps(&cfg, SPLIT, NQ);
		cfg.sample = n;
		assert_int_equal(braid_stripe_init(&st, NQ, NULL, &cfg), 0);
		warm_lanes(&st, 2 * BRAID_STRIPE_SAMPLE_WARM, &now);
		all_measured(&st, 3 * BRAID_STRIPE_QP_SAMPLE);
	}
	for (unsigned run = 0; run < 8; run += 7) {
		struct braid_stripe_cfg cfg;

		braid_stripe_cfg_qps(&cfg, SPLIT, NQ);
		cfg.sample = 4;
		cfg.sample_run = run; /* 0: 2 (a mark and one measured); 7: 4, all */
		assert_int_equal(braid_stripe_init(&st, NQ, NULL, &cfg), 0);
		warm_lanes(&st, BRAID_STRIPE_SAMPLE_WARM, &now);
		assert_int_equal(braid_stripe_sample(&st), BRAID_STRIPE_MARK);
		assert_int_equal(braid_stripe_sample(&st), BRAID_STRIPE_MEASURE);
		assert_int_equal(braid_stripe_sample(&st),
				 run ? BRAID_STRIPE_MEASURE : BRAID_STRIPE_SKIP);
	}
}

/* A measured chunk queued behind a marking one is timed from the marking one's
 * completion: the time the lane spent on it, not the wait behind the chunk ahead. */
static void marked_chunk_times_the_next(void **state)
{
	struct braid_stripe st;

	(void)state;
	qp_lanes(&st, SPLIT, BRAID_STRIPE_ADAPTIVE);
	braid_stripe_posted(&st, 0, MiB, 0); /* marks */
	braid_stripe_posted(&st, 0, MiB, 0); /* measured, behind it */
	braid_stripe_marked(&st, 0, MiB, 1000000);
	braid_stripe_reaped(&st);
	assert_true(braid_stripe_rate(&st, 0) == 0); /* no sample from a mark */
	assert_int_equal(st.lane[0].outstanding, MiB);
	braid_stripe_completed(&st, 0, MiB, 2000000);
	braid_stripe_reaped(&st);
	assert_true(braid_stripe_rate(&st, 0) > 0.99 * MiB * 1000 &&
		    braid_stripe_rate(&st, 0) < 1.01 * MiB * 1000);
	/* a lane that went idle: timed from the post */
	braid_stripe_posted(&st, 0, MiB, 5000000);
	braid_stripe_completed(&st, 0, MiB, 6000000);
	braid_stripe_reaped(&st);
	assert_true(braid_stripe_rate(&st, 0) > 0.99 * MiB * 1000 &&
		    braid_stripe_rate(&st, 0) < 1.01 * MiB * 1000);
}

/* While sampling, a lane's sample holds its whole run: a measured message timed from a
 * completion seen late reads fast, and over the run that counts once. Here the mark is
 * seen 1 ms late, with the first measured completion: alone that one would read 1 MiB in
 * no time; the run reads 3 MiB in 3 ms instead of 4. */
static void sample_holds_the_run(void **state)
{
	struct braid_stripe st;
	uint64_t now = 1000, t;
	uint32_t samples;
	double rate;

	(void)state;
	qp_lanes(&st, SPLIT, BRAID_STRIPE_ADAPTIVE);
	warm_lanes(&st, BRAID_STRIPE_SAMPLE_WARM, &now); /* 1 MiB/ms each */
	rate = braid_stripe_rate(&st, 0);
	samples = st.lane[0].samples;
	t = now + 1000000;
	for (int i = 0; i < BRAID_STRIPE_QP_SAMPLE_RUN; i++) {
		assert_int_equal(braid_stripe_sample(&st),
				 i ? BRAID_STRIPE_MEASURE : BRAID_STRIPE_MARK);
		braid_stripe_posted(&st, 0, MiB, t);
	}
	t += 2000000; /* the mark completed at +1 ms, seen with the next at +2 ms */
	braid_stripe_marked(&st, 0, MiB, t);
	braid_stripe_completed(&st, 0, MiB, t);
	braid_stripe_reaped(&st);
	for (int i = 2; i < BRAID_STRIPE_QP_SAMPLE_RUN; i++) {
		assert_int_equal(st.lane[0].samples, samples); /* not before the run ends */
		t += 1000000;
		braid_stripe_completed(&st, 0, MiB, t);
		braid_stripe_reaped(&st);
	}
	assert_int_equal(st.lane[0].samples, samples + 1);
	/* (BRAID_STRIPE_QP_SAMPLE_RUN - 1) MiB in (BRAID_STRIPE_QP_SAMPLE_RUN - 2) ms */
	assert_true(braid_stripe_rate(&st, 0) <
		    rate + BRAID_STRIPE_EMA_ALPHA * (1.6 * MiB * 1000 - rate));
}

/* While sampling, a run that reads far above the lane's rate (a link catching up after
 * idle time, a mark seen late) counts as BRAID_STRIPE_SAMPLE_CAP x the rate: the rate
 * moves by a quarter of the difference, not by several times. Without sampling, as
 * before. */
static void sample_capped(void **state)
{
	struct braid_stripe st;
	uint64_t now = 1000;
	double rate, cap;

	(void)state;
	for (int sampled = 0; sampled <= 1; sampled++) {
		qp_lanes(&st, SPLIT, BRAID_STRIPE_ADAPTIVE);
		if (!sampled)
			st.cfg.sample = 0;
		warm_lanes(&st, BRAID_STRIPE_SAMPLE_WARM, &now); /* 1 MiB/ms each */
		rate = braid_stripe_rate(&st, 0);
		cap = rate + BRAID_STRIPE_EMA_ALPHA * (BRAID_STRIPE_SAMPLE_CAP - 1) * rate;
		if (sampled) { /* the run's mark, done before the rest is posted */
			assert_int_equal(braid_stripe_sample(&st), BRAID_STRIPE_MARK);
			braid_stripe_posted(&st, 0, MiB, now);
			braid_stripe_marked(&st, 0, MiB, now + 1000000);
			braid_stripe_reaped(&st);
			now += 2000000;
		}
		/* then 3 MiB seen done 300 us after their post: 10 times the lane's rate */
		for (int i = 0; i < 3; i++) {
			assert_int_equal(braid_stripe_sample(&st), BRAID_STRIPE_MEASURE);
			braid_stripe_posted(&st, 0, MiB, now);
		}
		now += 300000;
		for (int i = 0; i < 3; i++)
			braid_stripe_completed(&st, 0, MiB, now);
		braid_stripe_reaped(&st);
		if (sampled)
			assert_true(braid_stripe_rate(&st, 0) < cap * 1.001);
		else
			assert_true(braid_stripe_rate(&st, 0) > 2 * cap);
	}
}

/* As slow_qp_gets_fewer_bytes, with each message asking braid_stripe_sample as net_ib
 * does: the same weights and goodput for a fraction of the messages measured; and the
 * QP on the slow path is named (braid_stripe_slow_lane) after no more traffic than when
 * every message is measured (its busy time is the measured part times the sampling). */
static void sampled_slow_qp(void **state)
{
	static struct qsim s;
	double bps, r, o;

	(void)state;
	memset(&s, 0, sizeof(s));
	qp_lanes(&s.st, SPLIT, BRAID_STRIPE_ADAPTIVE);
	s.sampled = 1;
	for (int q = 0; q < NQ; q++)
		s.bps[q] = q == 2 ? R / 4 : R;
	bps = qsim_run(&s, 600, 200, MiB);
	printf("qp lanes (sampled): %.2f GB/s, %d of 600 messages measured, weights %.3f %.3f "
	       "%.3f %.3f\n",
	       bps / 1e9, s.measured, braid_stripe_weight(&s.st, 0), braid_stripe_weight(&s.st, 1),
	       braid_stripe_weight(&s.st, 2), braid_stripe_weight(&s.st, 3));
	assert_true(s.measured <
		    600 * (BRAID_STRIPE_QP_SAMPLE_RUN - 1) / BRAID_STRIPE_QP_SAMPLE + 40);
	for (int q = 0; q < NQ; q++) {
		if (q == 2)
			continue;
		assert_true(s.bytes[2] * 2 < s.bytes[q]);
		assert_true(braid_stripe_weight(&s.st, q) > 0.3 &&
			    braid_stripe_weight(&s.st, q) < 0.31);
	}
	/* 1/13 each path's rate: 4/13 = 0.3077 and 1/13 = 0.0769 */
	assert_true(braid_stripe_weight(&s.st, 2) > 0.075 && braid_stripe_weight(&s.st, 2) < 0.08);
	assert_true(bps > 0.95 * 3.25 * R);

	/* The slow QP's chunks take 1/13 MiB / (R / 4) = 32 us: 100 ms of its busy time is
	 * about 3,100 messages, sampled or not (sampled, without counting the measured busy
	 * time up to the lane's, it would be over 5 times as many). */
	for (int sampled = 0; sampled <= 1; sampled++) {
		memset(&s, 0, sizeof(s));
		qp_lanes(&s.st, SPLIT, BRAID_STRIPE_ADAPTIVE);
		s.sampled = sampled;
		if (!sampled)
			s.st.cfg.sample = 0; /* every message measured */
		for (int q = 0; q < NQ; q++)
			s.bps[q] = q == 2 ? R / 4 : R;
		qsim_run(&s, 2800, 0, MiB);
		assert_int_equal(braid_stripe_slow_lane(&s.st, &r, &o), -1);
		qsim_run(&s, 700, 0, MiB);
		assert_int_equal(braid_stripe_slow_lane(&s.st, &r, &o), 2);
		assert_true(r > 0.95 * R / 4 && r < 1.05 * R / 4);
		assert_true(o > 0.95 * R && o < 1.05 * R);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(equal_is_nccls_cut),
		cmocka_unit_test(slow_qp_gets_fewer_bytes),
		cmocka_unit_test(whole_messages_follow_rates),
		cmocka_unit_test(sample_decision),
		cmocka_unit_test(marked_chunk_times_the_next),
		cmocka_unit_test(sample_holds_the_run),
		cmocka_unit_test(sample_capped),
		cmocka_unit_test(sampled_slow_qp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
