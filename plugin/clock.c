// SPDX-License-Identifier: Apache-2.0
#include "plugin/clock.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t braid_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t braid_random_u64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = braid_now_ns() ^ ((uint64_t)getpid() << 32);
	return v;
}
