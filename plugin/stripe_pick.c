// SPDX-License-Identifier: Apache-2.0
/*
 * The striping policy's choice of one lane for a whole message (plugin/stripe.h): a
 * message under the threshold, and one that finds every lane busy (braid_stripe_pick).
 * Apart from stripe.c, which measures and cuts.
 */
#include <math.h>

#include "plugin/stripe.h"

#include "plugin/stripe_int.h"

/* A lane of weight 0 (follow mode, before the other side's weights) finishes last but
 * finitely: 0 bytes over it read 0, never NaN. */
#define STRIPE_INV_WEIGHT_ZERO 1e30

void braid_stripe_weights_set(struct braid_stripe *st)
{
	for (int i = 0; i < st->nlanes; i++) {
		double w = st->lane[i].weight;

		/* down: an infinite finish time, never picked (no test of down in the pick) */
		st->lane[i].inv_weight = st->lane[i].down ? HUGE_VAL
					 : w > 0          ? 1 / w
							  : STRIPE_INV_WEIGHT_ZERO;
	}
}

/*
 * The lane for a whole message of size bytes: of lanes with unequal backlogs, the one that
 * would be done with it first (its bytes outstanding and the message, over its weight);
 * of equal backlogs, the heavier lane, or with none the one whose turn it is (idle lanes
 * take turns, whatever their weights: each stays measured). Fewest bytes outstanding
 * alone ignored the weights: a receiver that posts a window of messages at once (net_ofi
 * cuts when it posts) put every other one on a lane a quarter as fast, and R + R/4
 * carried half of R alone.
 */
/* The lane of [a, end) that would be done first, if sooner than *b's finish time *bt; of
 * equal backlogs the heavier (the same bytes over a smaller inverse), of idle ones the
 * first (*bo, the chosen lane's bytes outstanding, is 0: the turn stays). A lane down has
 * an infinite finish time, or NaN (no bytes): never sooner. */
static inline const struct braid_stripe_lane *
pick_over(const struct braid_stripe_lane *a, const struct braid_stripe_lane *end, size_t size,
	  const struct braid_stripe_lane *b, double *bt, uint64_t *bo)
{
	for (; a < end; a++) {
		/* signed: one instruction to convert (never 2^63 bytes) */
		double at = (double)(int64_t)(a->outstanding + size) * a->inv_weight;

		if (at < *bt && (a->outstanding | *bo)) {
			b = a;
			*bt = at;
			*bo = a->outstanding;
		}
	}
	return b;
}

int braid_stripe_pick_one(struct braid_stripe *st, size_t size)
{
	/* every message of a stream sent whole (braid_stripe_pick) comes here: in turn from
	 * the round robin's lane, in two runs rather than one that wraps, each lane's finish
	 * time once, by the weight's inverse */
	const struct braid_stripe_lane *lane = st->lane, *turn = lane + st->rr, *b = turn;
	double bt = HUGE_VAL;
	uint64_t bo = 1; /* the first lane up is taken whatever its backlog */
	int best;

	b = pick_over(turn, lane + st->nlanes, size, b, &bt, &bo);
	b = pick_over(lane, turn, size, b, &bt, &bo);
	best = (int)(b - lane);
	st->rr = best + 1 == st->nlanes ? 0 : best + 1;
	return best;
}

/*
 * A slow lane is picked only once the others' backlogs outweigh its slowness (8 messages
 * over 3 QPs at R never make one at R/4 the first to finish), and a lane never picked is
 * measured no more. So once in BRAID_STRIPE_PROBE_EVERY picks the message is cut by the
 * weights instead (-1), which gives every lane its share: a slow lane a small part that
 * ends with the others (a whole message there would hold NCCL's window, which is consumed
 * in order, for the whole message's time on the slow path), and a path that got faster
 * is seen. Not in equal mode (nothing there is measured).
 */
int braid_stripe_pick(struct braid_stripe *st, size_t size)
{
	if (__builtin_expect(!st->whole, 0)) {
		st->whole = 1;
		st->sampling = 0;
		st->pick_left = BRAID_STRIPE_PROBE_EVERY;
	}
	if (--st->pick_left == 0 && st->cfg.mode != BRAID_STRIPE_EQUAL) {
		st->pick_left = BRAID_STRIPE_PROBE_EVERY;
		return -1;
	}
	return braid_stripe_pick_one(st, size);
}
