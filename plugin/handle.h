/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection handle: what listen() writes into NCCL's 128-byte buffer and connect()
 * reads on the peer. It names the listener's out-of-band TCP address and carries a magic,
 * a version and a checksum, so that garbage, a truncated copy or a handle from another
 * plugin or braid version is refused with a clear error instead of a hang.
 */
#ifndef BRAID_HANDLE_H
#define BRAID_HANDLE_H

#include <stdint.h>
#include <sys/socket.h>

#include "nccl_net_abi.h"

#define BRAID_HANDLE_MAGIC 0x62726169u /* "brai" */
/* 4: the listener's NICs' networks (and since, in a former pad byte, which are down); 3: plugin/link.c set-up and goodbye; net_ofi size
 * announcements always */
#define BRAID_WIRE_VERSION 4
#define BRAID_HANDLE_NICS 8 /* BRAID_VDEV_MAX_NICS */

struct braid_handle {
	uint8_t backend; /* enum braid_backend_kind */
	uint32_t dev;    /* listener's device index, for messages */
	uint64_t nonce;  /* random per listen; the connector echoes it */
	struct sockaddr_storage addr;
	/* The listener's NICs, in its device's order, each by the network it is on as the
	 * backend says (net_ib: 8 bytes of the GID, ib_subnet.c). The connector pairs its own
	 * NICs with reachable ones before it makes its QPs, i.e. before any set-up message. */
	uint8_t nnics;
	uint8_t nic_net[BRAID_HANDLE_NICS][8];
	/* Bit k: the listener's NIC k was down when it listened (net_ib: port not ACTIVE).
	 * The connector pairs with the live ones; 0 from a listener that never says. */
	uint8_t nic_down;
};

/* Writes exactly NCCL_NET_HANDLE_MAXSIZE bytes (the rest zeroed). */
void braid_handle_encode(const struct braid_handle *h, void *out);
/* 0 and *h, or -1 with the reason in why. */
int braid_handle_decode(const void *in, struct braid_handle *h, char *why, size_t whylen);

/*
 * connect() is called again and again with the same handle buffer until it is done; the
 * bytes after the wire part remember the comm being built (as NCCL's IB transport does).
 * The listener zeroes them; a stage only counts when written by this process.
 */
void *braid_handle_stage_get(const void *handle);
void braid_handle_stage_set(void *handle, void *comm);

/* FNV-1a, for the handle and the wire header checks (integrity, not security). */
uint32_t braid_hash32(const void *data, size_t len);

#endif
