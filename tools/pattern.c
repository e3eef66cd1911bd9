// SPDX-License-Identifier: Apache-2.0
#include "tools/pattern.h"

#include <string.h>

#include "plugin/clock.h"

/* Word w of message (seed, msg): a hash of the word index, so a shifted copy fails. */
static uint64_t word_at(uint64_t base, uint64_t w)
{
	return braid_mix64(base + w * 0x9e3779b97f4a7c15ULL);
}

static uint64_t base_of(uint64_t seed, uint64_t msg)
{
	return braid_mix64(seed ^ braid_mix64(msg + 0x5851f42d4c957f2dULL));
}

uint8_t pattern_byte(uint64_t seed, uint64_t msg, size_t off)
{
	uint64_t w = word_at(base_of(seed, msg), off / 8);

	return (uint8_t)(w >> (8 * (off % 8)));
}

void pattern_fill(void *buf, size_t len, uint64_t seed, uint64_t msg)
{
	uint64_t base = base_of(seed, msg);
	unsigned char *p = buf;
	size_t words = len / 8, w;

	for (w = 0; w < words; w++) {
		uint64_t v = word_at(base, w);

		memcpy(p + 8 * w, &v, 8); /* little-endian byte order, as pattern_byte */
	}
	for (size_t off = words * 8; off < len; off++)
		p[off] = (uint8_t)(word_at(base, off / 8) >> (8 * (off % 8)));
}

size_t pattern_check_range(const void *buf, size_t from, size_t to, uint64_t seed, uint64_t msg)
{
	uint64_t base = base_of(seed, msg);
	const unsigned char *p = buf;
	size_t off = from;

	/* bytes up to a word boundary, whole words, then the tail */
	for (; off < to && off % 8; off++)
		if (p[off] != (uint8_t)(word_at(base, off / 8) >> (8 * (off % 8))))
			return off;
	for (; off + 8 <= to; off += 8) {
		uint64_t v = word_at(base, off / 8), got;

		memcpy(&got, p + off, 8);
		if (got != v)
			break;
	}
	for (; off < to; off++)
		if (p[off] != (uint8_t)(word_at(base, off / 8) >> (8 * (off % 8))))
			return off;
	return (size_t)-1;
}

size_t pattern_check(const void *buf, size_t len, uint64_t seed, uint64_t msg)
{
	return pattern_check_range(buf, 0, len, seed, msg);
}

uint64_t prng_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return braid_mix64(*state);
}

uint64_t prng_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + prng_next(state) % (hi - lo + 1);
}
