/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The out-of-band link between a comm and its peer comm, over plugin/oob.c's framed TCP:
 * connection set-up, then liveness and a clean goodbye. One state machine for both
 * backends; a backend only supplies its address blob and what to do with the peer's
 * (struct braid_link_ops).
 *
 *   connector                                        listener
 *   TCP connect  -------------------------------->   accept(2), one pending slot
 *   HELLO {nonce, backend, blob}  --------------->   nonce checked: else a stranger,
 *                                                    dropped (INFO + counter); ops->answer
 *          <-----------------------------------   REPLY {blob}
 *   ops->finish; READY  ------------------------>   the comm is ready
 *   ...                                              ...
 *   BYE {which buffers it wrote/filled}  -------->   (either side, at close)
 *
 * A listener keeps up to BRAID_LISTEN_PENDING connections in set-up and moves each one
 * on every accept() call, so a silent or slow stranger delays nobody, and anything that
 * is not a braid peer holding this listener's nonce is dropped without failing accept(),
 * as NCCL's own socket layer does (socketFinalizeAccept). After set-up the socket stays
 * open: a peer that closes its comm says goodbye first, so its hang-up is news only when
 * it did not (its process died).
 */
#ifndef BRAID_LINK_H
#define BRAID_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/backend.h"
#include "plugin/clock.h"
#include "plugin/handle.h"
#include "plugin/oob.h"

struct braid_ctr_dev;

/* Largest address blob a backend may exchange. */
#define BRAID_LINK_BLOB 2048

/*
 * What a closing comm tells its peer, in terms of the connection's receive buffers,
 * numbered from 0 in the receiver's posting order: which ones a send comm wrote (sent a
 * message into), or which ones a receive comm found filled. Below `base` all, from
 * `upto` on none, in between bit (i - base) of `bits`.
 */
#define BRAID_BYE_WINDOW 256
struct braid_link_bye {
	uint64_t base;
	uint64_t upto;
	uint64_t bits[BRAID_BYE_WINDOW / 64];
};

void braid_bye_init(struct braid_link_bye *b, uint64_t base, uint64_t upto);
void braid_bye_add(struct braid_link_bye *b, uint64_t buf);
void braid_bye_del(struct braid_link_bye *b, uint64_t buf);
int braid_bye_has(const struct braid_link_bye *b, uint64_t buf);

enum braid_link_state {
	BRAID_LINK_UP = 0,
	BRAID_LINK_BYE,    /* the peer closed its comm cleanly; peer_bye says what it did */
	BRAID_LINK_DEAD,   /* the peer hung up without a goodbye: its process died */
	BRAID_LINK_FAILED, /* the peer reported an error of its comm (peer_code, peer_why) */
};

struct braid_link {
	struct braid_oob_chan chan;
	char peer[64];        /* the peer's handshake address, for messages */
	int stage;            /* set-up progress (link.c) */
	uint64_t deadline_ns; /* set-up must be done by then */
	uint64_t nonce;
	uint64_t opened_ns;
	/* connector: the listener's NICs from its handle (struct braid_handle) */
	uint8_t peer_nnics;
	uint8_t peer_nic_net[BRAID_HANDLE_NICS][8];
	uint8_t peer_nic_down; /* bit k: its NIC k was down when it listened */
	/* after set-up */
	enum braid_link_state state;
	uint64_t next_check_ns;
	uint8_t tick_left; /* braid_link_check's calls until the next look */
	uint64_t bye_ns;   /* when the goodbye came */
	struct braid_link_bye peer_bye;
	int peer_code; /* BRAID_LINK_FAILED: the peer's ncclResult_t */
	char peer_why[200];
	/* a backend's own messages after set-up (braid_link_send), handed over by
	 * braid_link_check; NULL: the peer sending one is a protocol error */
	void (*on_msg)(void *arg, const void *msg, uint32_t len);
	void *msg_arg;
};

/* A backend's part of set-up. Each returns 0, or a -errno after a WARN saying why. */
struct braid_link_ops {
	const char *who; /* "ofi", "ib": the first word of every message */
	enum braid_backend_kind kind;
	/* connector: our blob for the HELLO */
	int (*hello)(void *comm, void *blob, uint32_t *len);
	/* connector: the listener's blob from the REPLY */
	int (*finish)(void *comm, const void *blob, uint32_t len);
	/* listener: make a comm for the peer of this HELLO blob, owning lk from now on, and
	 * write the REPLY blob */
	int (*answer)(void *listen_comm, struct braid_link *lk, const void *blob, uint32_t len,
		      void *reply, uint32_t *rlen, void **comm);
	/* listener: drop a comm that answer() made (its peer vanished before READY) */
	void (*discard)(void *comm);
	/* listen, optional: the device's NICs into the handle (nnics, nic_net, nic_down), for
	 * the connector's pairing before any set-up message */
	void (*handle_nics)(const struct braid_vdev *vd, struct braid_handle *h);
};

/* ---- the connector ---- */

/* connect()'s first call: decode and check the handle, start the TCP connect. */
ncclResult_t braid_link_dial(const struct braid_link_ops *ops, int dev, const void *handle,
			     struct braid_link **lk);
/* Every call: 0 ready, -EAGAIN not yet, another -errno when set-up failed (WARNed). */
int braid_link_connect_step(struct braid_link *lk, const struct braid_link_ops *ops, void *comm);

/* ---- the listener ---- */

#define BRAID_LISTEN_PENDING 64

struct braid_pending {
	struct braid_link *lk; /* the listener's until answer(), then the comm's */
	void *comm;            /* answer()'s comm, waiting for READY */
};

struct braid_listener {
	int fd;
	uint64_t nonce;            /* the connector presents it: it holds this listener's handle */
	char addr[64];             /* for messages */
	struct braid_ctr_dev *ctr; /* strangers are counted here; may be NULL */
	int npending;
	struct braid_pending pending[BRAID_LISTEN_PENDING];
};

ncclResult_t braid_listener_open(struct braid_listener *l, const struct braid_link_ops *ops,
				 int dev, void *handle, struct braid_ctr_dev *ctr);
/* accept(): move every connection in set-up; *comm when one is ready. An error only for
 * a peer that proved to hold this listener's handle, or for our own resources. */
ncclResult_t braid_listener_accept(struct braid_listener *l, const struct braid_link_ops *ops,
				   void *listen_comm, void **comm);
void braid_listener_close(struct braid_listener *l, const struct braid_link_ops *ops);

/* What listen() hands NCCL: the same for every backend. */
struct braid_listen_comm {
	uint32_t magic;         /* BRAID_MAGIC_LISTEN */
	int dev;                /* its first NIC, for messages */
	struct braid_vdev vdev; /* the NICs its comms stripe over */
	struct braid_listener lsn;
};

static inline struct braid_listen_comm *to_listen_comm(void *listen_comm)
{
	return listen_comm;
}

ncclResult_t braid_listen_comm_open(const struct braid_link_ops *ops, const struct braid_vdev *vd,
				    void *handle, struct braid_ctr_dev *ctr, void **listen_comm);
ncclResult_t braid_listen_comm_close(const struct braid_link_ops *ops, void *listen_comm);

/* ---- after set-up ---- */

/*
 * Look at the peer, at most every BRAID_LIVENESS_MS unless `now` is set: a goodbye, an
 * error report, or a hang-up, and the backend's messages (on_msg). Returns the state; the
 * change to BYE, DEAD or FAILED is seen once (the caller WARNs as fits).
 */
enum braid_link_state braid_link_check_timed(struct braid_link *lk, int now);

/*
 * The same, and without `now` once in BRAID_TICK_CALLS calls only: for the calls of the
 * data path that can learn the peer's news a few calls late (isend, test(); most of them
 * read no clock). irecv calls braid_link_check_post().
 */
static inline enum braid_link_state braid_link_check(struct braid_link *lk, int now)
{
	/* inline: the calls between two ticks are a decrement */
	if (!now && lk->tick_left) {
		lk->tick_left--;
		return lk->state;
	}
	if (!now)
		lk->tick_left = BRAID_TICK_CALLS - 1;
	return braid_link_check_timed(lk, now);
}
/*
 * irecv's look before it announces a receive. A comm with nothing in flight looks every
 * BRAID_LIVENESS_MS whatever the calls: nothing else looks at an idle comm's link, and
 * its first irecv after the peer's goodbye is refused at once (unless the link was
 * looked at less than BRAID_LIVENESS_MS before). With requests in flight, on the link's
 * tick as isend: no clock read per message, and the goodbye is seen at most 8 calls
 * later than a timed look would (docs/contract.md).
 */
static inline enum braid_link_state braid_link_check_post(struct braid_link *lk, int idle)
{
	return idle ? braid_link_check_timed(lk, 0) : braid_link_check(lk, 0);
}
/* The next braid_link_check or braid_link_check_timed looks at the peer whatever the
 * time (a backend that expects the peer's message soon). */
static inline void braid_link_look_soon(struct braid_link *lk)
{
	lk->next_check_ns = 0;
	lk->tick_left = 0;
}
/* Tell the peer that our comm failed in a way it cannot see by itself. Best effort. */
void braid_link_report_error(struct braid_link *lk, int code, const char *why);
/*
 * A backend's message to the peer comm after set-up (net_ib's NIC recovery), at most
 * BRAID_LINK_BLOB bytes, in order with the goodbye. Only when the peer said at set-up that
 * it takes them: one without an on_msg fails its comm with a protocol error. 0 once the
 * link has it: it goes out whole and once, now or at the next send or check, unless the
 * link dies. -EAGAIN when a message before it has still not left after 100 ms (a peer
 * that does not read): this one was not taken, and the caller may repeat it. Other -errno:
 * the socket failed.
 */
int braid_link_send(struct braid_link *lk, const void *msg, uint32_t len);
/* Close the link; with a goodbye when bye is not NULL (a comm that was set up). Frees lk. */
void braid_link_close(struct braid_link *lk, const struct braid_link_bye *bye);

/*
 * After the peer's goodbye: may a request still pending on these buffers complete? 0 when
 * every one of them was written (we receive) or filled (we send) by the peer, so the
 * completion is on its way; -1 when one never was: the request can never complete.
 * A request that may complete gets braid_link_grace_ns() from the goodbye.
 */
int braid_link_bye_covers(const struct braid_link *lk, const uint64_t *bufs, int n);
uint64_t braid_link_grace_ns(void);
/*
 * A request still waiting on buffers bufs[0..n) after the peer's goodbye: 0 while it may
 * complete, -1 (after one WARN starting with `who`) when it never will, or no longer
 * within braid_link_grace_ns(). is_send: we wrote the buffers (else we receive).
 */
int braid_link_judge(const struct braid_link *lk, const uint64_t *bufs, int n, int is_send,
		     const char *who);

/* A failed set-up step as NCCL's result: the peer or the fabric, unless memory. */
static inline ncclResult_t braid_link_error(int rc)
{
	/* -ENOMEM, -ENOSPC (a comm limit, BRAID_MAX_COMMS): ours, not the peer's */
	return rc == -12 || rc == -28 ? ncclSystemError : ncclRemoteError;
}

#endif
