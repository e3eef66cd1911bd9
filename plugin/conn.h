/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one connect/accept driver: every backend's connect() and accept() are these, with
 * the backend supplying how a comm is made, made ready and freed. The protocol itself
 * (the handshake, liveness, goodbye) is plugin/link.h's.
 *
 * connect() is non-blocking, as NCCL's: its first call dials and builds the comm, later
 * calls step the handshake. Between calls the comm is staged in NCCL's handle, as
 * ncclIbConnect stages its comm in the handle's stage field; so connect writes into the
 * handle NCCL passes, which is why the handle is not const here.
 */
#ifndef BRAID_CONN_H
#define BRAID_CONN_H

#include "nccl_net_abi.h"
#include "plugin/backend.h"
#include "plugin/link.h"

struct braid_conn_ops {
	const struct braid_link_ops *link;
	/* A send comm around a dialed link, with its resources open. NULL with *rc set
	 * (-errno) on failure, after freeing what it made; the link stays the caller's. */
	void *(*create)(const struct braid_vdev *vd, const struct braid_conn_opts *opts,
			struct braid_link *lk, int *rc);
	struct braid_link *(*link_of)(void *comm);
	/* The handshake is done: the comm becomes NCCL's. */
	void (*ready)(void *comm, int is_send);
	/* Free a comm whose handshake failed, its link with it. */
	void (*destroy)(void *comm);
};

ncclResult_t braid_conn_connect(const struct braid_conn_ops *ops, const struct braid_vdev *vd,
				const struct braid_conn_opts *opts, void *handle, void **send_comm);
ncclResult_t braid_conn_accept(const struct braid_conn_ops *ops, void *listen_comm,
			       void **recv_comm);

#endif
