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
