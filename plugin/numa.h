/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host memory near a NIC. What the NIC reads and writes for every message (request pools
 * with the entries it DMAs, the verbs FIFO) goes on the NIC's NUMA node, as topo/ reports
 * it, so that DMA does not cross the socket interconnect. A preference, not a binding:
 * when the node is full the kernel falls back instead of failing.
 */
#ifndef BRAID_NUMA_H
#define BRAID_NUMA_H

#include <stddef.h>

/* Zeroed, page-aligned memory whose pages prefer node (node < 0: no preference).
 * NULL when out of memory. */
void *braid_numa_alloc(size_t len, int node);
void braid_numa_free(void *p, size_t len);

#endif
