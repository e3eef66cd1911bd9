// SPDX-License-Identifier: Apache-2.0
/*
 * One NIC's QPs as striping lanes (braid_stripe_cfg_qps, as net_ib sets up a rail with
 * several QPs): the cut NCCL made (every QP an equal part above BRAID_IB_SPLIT_BYTES) is
 * what equal weights give, the parts always sum to the message on 128-byte boundaries, and
 * on a fake clock with each QP a FIFO server at its ECMP path's rate a QP on a path at a
 * quarter of the others' rate is given fewer bytes, so a message no longer waits for it.
 */
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
};

static void qsim_post(struct qsim *s, int slot, size_t size, int count)
{
	size_t len[BRAID_STRIPE_MAX_LANES];

	cut(&s->st, size, len);
	for (int q = 0; q < NQ; q++) {
		s->part[slot][q] = len[q];
		s->done[slot][q] = 0;
		if (!len[q])
			continue;
		s->free_at[q] = (s->free_at[q] > s->now ? s->free_at[q] : s->now) +
				(uint64_t)((double)len[q] * 1e9 / s->bps[q] + 0.5);
		s->done[slot][q] = s->free_at[q];
		braid_stripe_posted(&s->st, q, len[q], s->now);
		if (count)
			s->bytes[q] += len[q];
	}
}

/* nmsg messages of size, INFLIGHT at once, each reposted as soon as it completes; each
 * completion is one CQ read (batched, as net_ib). Bytes/s after the first warm. */
static double qsim_run(struct qsim *s, int nmsg, int warm, size_t size)
{
	int posted = 0, done = 0;
	uint64_t t_warm = 0;

	for (int i = 0; i < INFLIGHT; i++)
		qsim_post(s, i, size, posted++ >= warm);
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
		braid_stripe_completed(&s->st, q, s->part[slot][q], s->now);
		braid_stripe_reaped(&s->st);
		for (int j = 0; j < NQ; j++)
			left += s->done[slot][j] != 0;
		if (left)
			continue;
		if (++done == warm)
			t_warm = s->now;
		if (posted < nmsg)
			qsim_post(s, slot, size, posted++ >= warm);
		else
			for (int j = 0; j < NQ; j++)
				s->part[slot][j] = 0;
	}
	return (double)(nmsg - warm) * (double)size * 1e9 / (double)(s->now - t_warm);
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
		for (int q = 0; q < NQ; q++) {
			if (q == 2)
				continue;
			assert_true(s.bytes[2] * 2 < s.bytes[q]);
			assert_true(braid_stripe_weight(&s.st, 2) * 2 <
				    braid_stripe_weight(&s.st, q));
		}
		assert_true(braid_stripe_weight(&s.st, 2) > 0.05 &&
			    braid_stripe_weight(&s.st, 2) < 0.1);
		assert_true(bps > 0.9 * 3.25 * R);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(equal_is_nccls_cut),
		cmocka_unit_test(slow_qp_gets_fewer_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
