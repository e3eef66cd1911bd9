// SPDX-License-Identifier: Apache-2.0
/*
 * The striping policy's choice of one lane for a whole message (plugin/stripe.h): a
 * message under the threshold, and one that finds every lane busy (braid_stripe_pick).
 * Apart from stripe.c, which measures and cuts.
 */
#include "plugin/stripe.h"

#include "plugin/stripe_int.h"

/*
 * The lane for a whole message of size bytes: of lanes with unequal backlogs, the one that
 * would be done with it first (its bytes outstanding and the message, over its weight,
 * compared cross-multiplied); of equal backlogs, the heavier lane, or with none the one
 * whose turn it is (idle lanes take turns, whatever their weights: each stays measured).
 * Fewest bytes outstanding alone ignored the weights: a receiver that posts a window of
 * messages at once (net_ofi cuts when it posts) put every other one on a lane a quarter
 * as fast, and R + R/4 carried half of R alone.
 */
int braid_stripe_pick_one(struct braid_stripe *st, size_t size)
{
	int n = st->nlanes, best = st->rr, i = best;
	const struct braid_stripe_lane *b = &st->lane[best];

	/* every message of a stream sent whole (braid_stripe_pick) comes here: no division,
	 * the best lane's record kept at hand */
	for (int k = 1; k < n; k++) {
		const struct braid_stripe_lane *a;

		if (++i == n)
			i = 0;
		a = &st->lane[i];
		if (a->down)
			continue;
		if (b->down ||
		    (a->outstanding == b->outstanding
			     ? a->outstanding && a->weight > b->weight
			     : /* signed: one instruction to convert (never 2^63 bytes) */
			     (double)(int64_t)(a->outstanding + size) * b->weight <
				     (double)(int64_t)(b->outstanding + size) * a->weight)) {
			best = i;
			b = a;
		}
	}
	st->rr = best + 1 == n ? 0 : best + 1;
	return best;
}

/*
 * A slow lane is picked only once the others' backlogs outweigh its slowness (with 8
 * messages over 4 QPs, one at a quarter of the others' rate never is), and a lane never
 * picked is measured no more: once in BRAID_STRIPE_PROBE_EVERY picks a live lane with
 * nothing outstanding (in turn) takes the message, so that a path that got faster is
 * seen. Not in equal mode (nothing there is measured).
 */
static int stripe_pick_probe(struct braid_stripe *st)
{
	int n = st->nlanes;

	if (st->probe_left > 1 || st->cfg.mode == BRAID_STRIPE_EQUAL) {
		st->probe_left--;
		return -1;
	}
	st->probe_left = BRAID_STRIPE_PROBE_EVERY;
	for (int k = 0; k < n; k++) {
		int i = (st->probe_next + k) % n;

		if (!st->lane[i].down && !st->lane[i].outstanding) {
			st->probe_next = (i + 1) % n;
			return i;
		}
	}
	return -1;
}

int braid_stripe_pick(struct braid_stripe *st, size_t size)
{
	int lane;

	if (__builtin_expect(!st->whole, 0)) {
		st->whole = 1;
		st->sampling = 0;
	}
	lane = stripe_pick_probe(st);
	return lane >= 0 ? lane : braid_stripe_pick_one(st, size);
}
