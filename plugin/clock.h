/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Time and randomness for every part of the plugin. A leaf: it calls nothing of braid's,
 * so counters, the link and the backends all depend on it and on nothing in each other.
 */
#ifndef BRAID_CLOCK_H
#define BRAID_CLOCK_H

#include <stdint.h>

uint64_t braid_now_ns(void); /* CLOCK_MONOTONIC */
/* getrandom(), or the clock and pid when the entropy pool is not ready (early boot). */
uint64_t braid_random_u64(void);

/*
 * The calls that wait (a test() that finds its request pending, an isend() with no receive
 * to match yet) read the clock once in BRAID_TICK_CALLS, not each time: what they time is
 * counted in milliseconds (a stall, the liveness checks), NCCL's proxy calls them
 * microseconds apart, and a clock read was a quarter to a third of such a call's
 * instructions (docs/benchmarks-ipm.md). A caller that polls once a millisecond sees those
 * checks up to 7 ms later. *left: the caller's countdown; started at 0 the first call
 * reads the clock, at BRAID_TICK_CALLS - 1 (a request's: most complete before their 8th
 * waiting test()) the eighth. Each request keeps its own: NCCL tests its requests in
 * turn, and a comm's count of 8 would land on the same one of 8 requests every time and
 * never check the others.
 */
#define BRAID_TICK_CALLS 8u

static inline int braid_tick_due(uint8_t *left)
{
	if (*left) {
		--*left;
		return 0;
	}
	*left = BRAID_TICK_CALLS - 1;
	return 1;
}

/* splitmix64's finaliser: a cheap, well-mixed 64-bit hash (flow labels, test patterns). */
static inline uint64_t braid_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

#endif
