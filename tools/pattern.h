/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Deterministic data patterns for verifying every byte a transfer moves: the byte at
 * offset o of message m under seed s depends on (s, m, o) only, so sender and receiver
 * agree without talking, and a misplaced, shifted or stale block is caught.
 */
#ifndef BRAID_TOOLS_PATTERN_H
#define BRAID_TOOLS_PATTERN_H

#include <stddef.h>
#include <stdint.h>

void pattern_fill(void *buf, size_t len, uint64_t seed, uint64_t msg);

/* Returns the offset of the first wrong byte, or (size_t)-1 when all are right. */
size_t pattern_check(const void *buf, size_t len, uint64_t seed, uint64_t msg);

/* The same for bytes [from, to) of a buffer filled over [0, ...). */
size_t pattern_check_range(const void *buf, size_t from, size_t to, uint64_t seed, uint64_t msg);

/* The byte pattern_fill() puts at `off`, for error messages. */
uint8_t pattern_byte(uint64_t seed, uint64_t msg, size_t off);

/* A small, fast, deterministic PRNG (splitmix64) for schedules both sides must share. */
uint64_t prng_next(uint64_t *state);
/* Uniform in [lo, hi]. */
uint64_t prng_range(uint64_t *state, uint64_t lo, uint64_t hi);

#endif /* BRAID_TOOLS_PATTERN_H */
