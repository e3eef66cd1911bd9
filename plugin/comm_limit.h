/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How many comms a NIC may hold: the NIC's own limit, lowered by BRAID_MAX_COMMS. A leaf
 * the core (for maxComms in the properties) and the backends (at connect and accept) share,
 * so that no backend calls up into the core.
 */
#ifndef BRAID_COMM_LIMIT_H
#define BRAID_COMM_LIMIT_H

/* The comms a NIC may hold at once: its own limit, lowered by BRAID_MAX_COMMS. */
int braid_max_comms(int nic_limit);
/* A new comm on a NIC that holds `open` already: 0, or -ENOSPC after a WARN naming the
 * limit and the knob. who/dev/peer: for the message. */
int braid_comm_limit_check(const char *who, const char *dev, int open, int nic_limit,
			   const char *what, const char *peer);

#endif
