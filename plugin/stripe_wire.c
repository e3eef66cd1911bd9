// SPDX-License-Identifier: Apache-2.0
/*
 * The striping weights on the wire (plugin/stripe.h): the side that measures sends its
 * lanes' weights as one 64-bit word, and the other side's cut follows them
 * (docs/multirail.md). Apart from stripe.c, which measures and cuts, since this is only
 * the word's form: what fits it, and when a change is worth sending.
 */
#include "plugin/stripe.h"

#include <errno.h>

#include "plugin/stripe_int.h"

/* Bits of one lane's weight on the wire: 16 for up to 4 lanes (the form of 4-NIC
 * devices, unchanged), 8 for 5 to 8. */
static unsigned wire_bits(int nlanes)
{
	return nlanes <= 4 ? 16u : 8u;
}

static unsigned wire_lane(uint64_t wire, int i, unsigned bits)
{
	return (unsigned)(wire >> (bits * (unsigned)i)) & ((1u << bits) - 1);
}

uint64_t braid_stripe_weights_wire(const struct braid_stripe *st)
{
	unsigned bits = wire_bits(st->nlanes);
	double top = (double)((1u << bits) - 1);
	uint64_t wire = 0;

	for (int i = 0; i < st->nlanes; i++) {
		double w = st->lane[i].weight * top + 0.5;
		uint64_t v = w >= top ? (uint64_t)top : w > 0 ? (uint64_t)w : 0;

		wire |= v << (bits * (unsigned)i);
	}
	return wire;
}

int braid_stripe_wire_moved(uint64_t sent, uint64_t now, int nlanes)
{
	unsigned bits = wire_bits(nlanes);
	unsigned hyst = bits == 16 ? BRAID_STRIPE_WIRE_HYSTERESIS
				   : (BRAID_STRIPE_WIRE_HYSTERESIS * 255u + 65534u) / 65535u;

	for (int i = 0; i < nlanes && i < BRAID_STRIPE_MAX_LANES; i++) {
		unsigned a = wire_lane(sent, i, bits), b = wire_lane(now, i, bits);

		if ((a > b ? a - b : b - a) >= hyst)
			return 1;
	}
	return 0;
}

int braid_stripe_wire_valid(uint64_t wire, int nlanes)
{
	unsigned used = wire_bits(nlanes) * (unsigned)nlanes;
	uint64_t mine = used >= 64 ? ~0ULL : (1ULL << used) - 1;

	return nlanes >= 1 && nlanes <= BRAID_STRIPE_MAX_LANES && (wire & mine) && !(wire & ~mine);
}

int braid_stripe_follow(struct braid_stripe *st, uint64_t wire)
{
	unsigned bits = wire_bits(st->nlanes);
	double sum = 0;

	if (!braid_stripe_wire_valid(wire, st->nlanes))
		return -EINVAL;
	for (int i = 0; i < st->nlanes; i++)
		sum += (double)wire_lane(wire, i, bits);
	for (int i = 0; i < st->nlanes; i++)
		st->lane[i].weight = (double)wire_lane(wire, i, bits) / sum;
	braid_stripe_weights_set(st);
	st->memo.size = 0;
	return 0;
}
