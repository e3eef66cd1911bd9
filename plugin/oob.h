/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Out-of-band TCP, the framing under plugin/link.c's set-up and goodbye. Everything is
 * non-blocking (NCCL's listen/connect/accept must not block); reads are bounded by a
 * framed header with magic, version, type, length and a checksum of the payload.
 */
#ifndef BRAID_OOB_H
#define BRAID_OOB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define BRAID_OOB_MAX_PAYLOAD 4096

/* The address listen() advertises: from BRAID_SOCKET_IFNAME / NCCL_SOCKET_IFNAME. */
int braid_oob_pick_addr(struct sockaddr_storage *addr, char *ifname, size_t ifname_len);
void braid_oob_addr_str(const struct sockaddr_storage *addr, char *buf, size_t len);

/* Bind a non-blocking listening socket on addr (port 0: any); *addr gets the real port. */
int braid_oob_listen(struct sockaddr_storage *addr, int *fd);
/* 0 and *fd when a connection was waiting, -EAGAIN when none, other -errno on failure. */
int braid_oob_accept(int lfd, int *fd);
/* Starts a non-blocking connect. */
int braid_oob_connect(const struct sockaddr_storage *addr, int *fd);
/* 0 connected, -EINPROGRESS not yet, other -errno failed. */
int braid_oob_connect_done(int fd);

/* A framed message channel on a connected socket. */
struct braid_oob_chan {
	int fd;
	uint32_t tx_len, tx_off;
	uint32_t rx_off;
	uint8_t tx[16 + BRAID_OOB_MAX_PAYLOAD];
	uint8_t rx[16 + BRAID_OOB_MAX_PAYLOAD];
};

void braid_oob_chan_init(struct braid_oob_chan *ch, int fd);
/* Stage one message (fails with -EBUSY while the previous one is unsent). */
int braid_oob_chan_post(struct braid_oob_chan *ch, uint16_t type, const void *payload,
			uint32_t len);
/* Push staged bytes: 0 all sent, -EAGAIN not yet, other -errno failed. */
int braid_oob_chan_flush(struct braid_oob_chan *ch);
/*
 * Receive one message of any type: 0 and (*type, *payload, *len) pointing into the
 * channel's buffer (valid until the next call), -EAGAIN not complete yet, -EPROTO for a bad
 * header or checksum (why says what was wrong), -ECONNRESET when the peer closed, other
 * -errno.
 */
int braid_oob_chan_recv_any(struct braid_oob_chan *ch, uint16_t *type, const void **payload,
			    uint32_t *len, char *why, size_t whylen);
/* The same, for a message of the expected type only (another type: -EPROTO). */
int braid_oob_chan_recv(struct braid_oob_chan *ch, uint16_t type, const void **payload,
			uint32_t *len, char *why, size_t whylen);

#endif
