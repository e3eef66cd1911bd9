/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The steps of connection set-up that do not depend on the network: the listener's
 * handshake socket and handle, the connector's first call (decode and check the handle,
 * start the TCP connect), the acceptor's first call (take a waiting connection), and the
 * set-up deadline. Each backend then runs its own handshake messages over plugin/oob.h.
 */
#ifndef BRAID_SETUP_H
#define BRAID_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/backend.h"

uint64_t braid_now_ns(void); /* CLOCK_MONOTONIC */
uint64_t braid_random_u64(void);

struct braid_listener {
	int fd;
	uint64_t nonce; /* the connector echoes it: proves it holds this listener's handle */
	char addr[64];  /* for messages */
};

/* who: the backend's name for messages ("ofi", "ib"). */
ncclResult_t braid_setup_listen(enum braid_backend_kind kind, const char *who, int dev,
				void *handle, struct braid_listener *l);
/* Decode and check the handle, start connecting: *fd, the listener's nonce and address. */
ncclResult_t braid_setup_dial(enum braid_backend_kind kind, const char *who, int dev,
			      const void *handle, int *fd, uint64_t *nonce, char *peer,
			      size_t peerlen);
/* A waiting connection: 0 and *fd, -EAGAIN when none, else the failure (WARNed). */
int braid_setup_answer(const struct braid_listener *l, const char *who, int *fd, char *peer,
		       size_t peerlen);

/* When set-up that has reached its peer must be done (BRAID_CONN_TIMEOUT_MS from now). */
uint64_t braid_setup_deadline(void);
/* -ETIMEDOUT (with a WARN naming the peer) once the deadline has passed, else rc. */
int braid_setup_check_deadline(int rc, uint64_t deadline_ns, const char *who, const char *what,
			       const char *peer);
/* A failed handshake step as NCCL's result: the peer or the fabric, unless memory. */
static inline ncclResult_t braid_setup_error(int rc)
{
	return rc == -12 /* -ENOMEM */ ? ncclSystemError : ncclRemoteError;
}

#endif
