// SPDX-License-Identifier: Apache-2.0
/* The out-of-band link: set-up, liveness and goodbye (protocol in link.h). */
#include "plugin/link.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "plugin/clock.h"
#include "plugin/counters.h"
#include "plugin/handle.h"
#include "plugin/log.h"
#include "plugin/params.h"

enum link_msg {
	MSG_HELLO = 1,
	MSG_REPLY = 2,
	MSG_READY = 3,
	MSG_BYE = 4,
	MSG_PEER_ERROR = 5,
	MSG_BACKEND = 6, /* a backend's own, after set-up (braid_link_send) */
};

enum link_stage {
	STAGE_CONNECTING, /* connector: TCP connect in progress */
	STAGE_HELLO,      /* connector: sending HELLO; listener: waiting for it */
	STAGE_REPLY,      /* connector: waiting for REPLY; listener: sending it */
	STAGE_READY,      /* connector: sending READY; listener: waiting for it */
	STAGE_UP,
};

struct wire_hello {
	uint64_t nonce;
	uint8_t backend;
	uint8_t pad[3];
	uint32_t blob_len;
	uint8_t blob[BRAID_LINK_BLOB];
} __attribute__((packed));

struct wire_reply {
	uint32_t blob_len;
	uint8_t blob[BRAID_LINK_BLOB];
} __attribute__((packed));

struct wire_bye {
	uint64_t base, upto;
	uint64_t bits[BRAID_BYE_WINDOW / 64];
} __attribute__((packed));

struct wire_peer_error {
	int32_t code;
	char why[200];
} __attribute__((packed));

_Static_assert(sizeof(struct wire_hello) <= BRAID_OOB_MAX_PAYLOAD, "HELLO fits a frame");

static uint64_t ms_to_ns(int64_t ms)
{
	return (uint64_t)ms * 1000000ULL;
}

/* ---- goodbye ---- */

int braid_link_bye_covers(const struct braid_link *lk, const uint64_t *bufs, int n)
{
	for (int i = 0; i < n; i++)
		if (!braid_bye_has(&lk->peer_bye, bufs[i]))
			return -1;
	return 0;
}

int braid_link_judge(const struct braid_link *lk, const uint64_t *bufs, int n, int is_send,
		     const char *who)
{
	uint64_t waited = braid_now_ns() - lk->bye_ns;

	if (braid_link_bye_covers(lk, bufs, n)) {
		BRAID_WARN("%s: peer %s closed its comm before it %s buffer %llu; this request "
			   "can never complete",
			   who, lk->peer, is_send ? "received into" : "sent to",
			   (unsigned long long)bufs[0]);
		return -1;
	}
	if (waited <= braid_link_grace_ns())
		return 0; /* its data was on its way: it completes */
	BRAID_WARN("%s: a request on buffer %llu is not complete %.1f s after peer %s closed its "
		   "comm",
		   who, (unsigned long long)(n ? bufs[0] : 0), (double)waited / 1e9, lk->peer);
	return -1;
}

uint64_t braid_link_grace_ns(void)
{
	/* Data the peer had handed to the network before closing lands within moments;
	 * ten liveness periods, at least two seconds, leave room for a loaded host. */
	uint64_t g = 10 * ms_to_ns(braid_param_int(BRAID_P_LIVENESS_MS));

	return g < 2000000000ULL ? 2000000000ULL : g;
}

/* ---- links ---- */

static struct braid_link *link_new(int fd, const char *peer)
{
	struct braid_link *lk = calloc(1, sizeof(*lk));

	if (!lk)
		return NULL;
	braid_oob_chan_init(&lk->chan, fd);
	snprintf(lk->peer, sizeof(lk->peer), "%s", peer);
	lk->opened_ns = braid_now_ns();
	lk->deadline_ns = lk->opened_ns + ms_to_ns(braid_param_int(BRAID_P_CONN_TIMEOUT_MS));
	return lk;
}

static void link_free(struct braid_link *lk)
{
	if (!lk)
		return;
	if (lk->chan.fd >= 0)
		close(lk->chan.fd);
	free(lk);
}

/* Past the set-up deadline: -ETIMEDOUT with a WARN naming the peer. */
static int past_deadline(const struct braid_link *lk, const char *who, const char *what)
{
	if (braid_now_ns() <= lk->deadline_ns)
		return 0;
	BRAID_WARN("%s: %s %s: not finished after %lld ms (BRAID_CONN_TIMEOUT_MS); the peer "
		   "stopped answering",
		   who, what, lk->peer, (long long)braid_param_int(BRAID_P_CONN_TIMEOUT_MS));
	return -ETIMEDOUT;
}

ncclResult_t braid_link_dial(const struct braid_link_ops *ops, int dev, const void *handle,
			     struct braid_link **out)
{
	struct braid_handle h;
	char why[128], peer[64];
	int rc, fd;

	if (braid_handle_decode(handle, &h, why, sizeof(why))) {
		BRAID_WARN("%s: connect on device %d: %s", ops->who, dev, why);
		return ncclInvalidArgument;
	}
	if (h.backend != ops->kind) {
		BRAID_WARN("%s: connect on device %d: the peer listens with another backend (%u); "
			   "set the same BRAID_BACKEND on every rank",
			   ops->who, dev, h.backend);
		return ncclInvalidUsage;
	}
	rc = braid_oob_connect(&h.addr, &fd);
	if (rc) {
		BRAID_WARN("%s: connect on device %d: socket: %s", ops->who, dev, strerror(-rc));
		return ncclSystemError;
	}
	braid_oob_addr_str(&h.addr, peer, sizeof(peer));
	*out = link_new(fd, peer);
	if (!*out) {
		close(fd);
		return ncclSystemError;
	}
	(*out)->nonce = h.nonce;
	(*out)->peer_nnics = h.nnics;
	memcpy((*out)->peer_nic_net, h.nic_net, sizeof(h.nic_net));
	(*out)->peer_nic_down = h.nic_down;
	(*out)->stage = STAGE_CONNECTING;
	return ncclSuccess;
}

static int connect_step(struct braid_link *lk, const struct braid_link_ops *ops, void *comm)
{
	const void *payload;
	uint32_t len;
	char why[160];
	int rc;

	switch (lk->stage) {
	case STAGE_CONNECTING: {
		struct wire_hello hello = { .nonce = lk->nonce, .backend = (uint8_t)ops->kind };
		uint32_t blen = sizeof(hello.blob);

		rc = braid_oob_connect_done(lk->chan.fd);
		if (rc == -EINPROGRESS)
			return -EAGAIN;
		if (rc) {
			BRAID_WARN("%s: connect to %s: %s (is the peer process alive?)", ops->who,
				   lk->peer, strerror(-rc));
			return rc;
		}
		rc = ops->hello(comm, hello.blob, &blen);
		if (rc)
			return rc;
		hello.blob_len = htonl(blen);
		braid_oob_chan_post(&lk->chan, MSG_HELLO, &hello,
				    (uint32_t)offsetof(struct wire_hello, blob) + blen);
		lk->stage = STAGE_HELLO;
	}
		/* fall through */
	case STAGE_HELLO:
		rc = braid_oob_chan_flush(&lk->chan);
		if (rc)
			return rc;
		lk->stage = STAGE_REPLY;
		/* fall through */
	case STAGE_REPLY: {
		const struct wire_reply *reply;

		rc = braid_oob_chan_recv(&lk->chan, MSG_REPLY, &payload, &len, why, sizeof(why));
		if (rc == -EAGAIN)
			return rc;
		if (rc == -EPROTO) {
			BRAID_WARN("%s: connect to %s: bad reply: %s", ops->who, lk->peer, why);
			return rc;
		}
		if (rc) {
			BRAID_WARN("%s: connect to %s: the listener closed the connection (%s): it "
				   "refused our hello (a handle of another listener?), is at its comm limit "
				   "(maxComms; its own WARN says so) or died",
				   ops->who, lk->peer, strerror(-rc));
			return rc;
		}
		reply = payload;
		if (len < offsetof(struct wire_reply, blob) ||
		    ntohl(reply->blob_len) != len - offsetof(struct wire_reply, blob)) {
			BRAID_WARN("%s: connect to %s: reply of %u bytes is malformed", ops->who,
				   lk->peer, len);
			return -EPROTO;
		}
		rc = ops->finish(comm, reply->blob, ntohl(reply->blob_len));
		if (rc)
			return rc;
		braid_oob_chan_post(&lk->chan, MSG_READY, NULL, 0);
		lk->stage = STAGE_READY;
	}
		/* fall through */
	case STAGE_READY:
		rc = braid_oob_chan_flush(&lk->chan);
		if (rc)
			return rc;
		lk->stage = STAGE_UP;
		return 0;
	case STAGE_UP: return 0;
	}
	return -EINVAL;
}

int braid_link_connect_step(struct braid_link *lk, const struct braid_link_ops *ops, void *comm)
{
	int rc = connect_step(lk, ops, comm);

	if (rc == -EAGAIN && past_deadline(lk, ops->who, "connect to"))
		return -ETIMEDOUT;
	return rc;
}

/* ---- the listener ---- */

ncclResult_t braid_listener_open(struct braid_listener *l, const struct braid_link_ops *ops,
				 int dev, void *handle, struct braid_ctr_dev *ctr)
{
	struct braid_handle h = { .backend = (uint8_t)ops->kind, .dev = (uint32_t)dev };
	char ifname[64];
	int rc;

	memset(l, 0, sizeof(*l));
	rc = braid_oob_pick_addr(&h.addr, ifname, sizeof(ifname));
	if (!rc)
		rc = braid_oob_listen(&h.addr, &l->fd);
	if (rc) {
		BRAID_WARN("%s: listen on device %d: no handshake socket: %s", ops->who, dev,
			   strerror(-rc));
		return ncclSystemError;
	}
	h.nonce = braid_random_u64();
	l->nonce = h.nonce;
	l->ctr = ctr;
	braid_oob_addr_str(&h.addr, l->addr, sizeof(l->addr));
	braid_handle_encode(&h, handle);
	BRAID_TRACE("%s: listening for device %d on %s (%s)", ops->who, dev, l->addr, ifname);
	return ncclSuccess;
}

/* A connection that is not a braid peer of this listener: one INFO line, a counter. */
static void drop_stranger(struct braid_listener *l, const struct braid_link_ops *ops, int i,
			  const char *why)
{
	struct braid_pending *p = &l->pending[i];

	BRAID_INFO(NCCL_NET, "%s: listener %s: dropped a connection from %s after %.1f s: %s",
		   ops->who, l->addr, p->lk->peer,
		   (double)(braid_now_ns() - p->lk->opened_ns) / 1e9, why);
	if (l->ctr)
		braid_ctr_add(&l->ctr->strangers, 1);
	link_free(p->lk);
	l->pending[i] = l->pending[--l->npending];
}

/* A connection whose peer holds our nonce, then failed: an error of the real peer. */
static void drop_peer(struct braid_listener *l, const struct braid_link_ops *ops, int i)
{
	struct braid_pending *p = &l->pending[i];

	if (p->comm)
		ops->discard(p->comm); /* frees its link too */
	else
		link_free(p->lk);
	l->pending[i] = l->pending[--l->npending];
}

/*
 * Take waiting TCP connections while there is room. When every slot is taken, one that has
 * not said hello for BRAID_LISTEN_EVICT_MS makes room, so a flood of strangers delays
 * peers by that much at most and can never lock them out; otherwise newcomers wait in the
 * kernel's backlog. A real peer says hello on its first connect() call after the TCP
 * connection completes, which a busy proxy thread opening 1,024 verbs comms at once was
 * seen to take 2.9 s to make: the bound is generous.
 */
#define BRAID_LISTEN_EVICT_MS 10000

static void take_new(struct braid_listener *l, const struct braid_link_ops *ops)
{
	for (;;) {
		uint64_t now = braid_now_ns();
		struct sockaddr_storage addr;
		socklen_t alen = sizeof(addr);
		char peer[64];
		int fd, rc;

		if (l->npending == BRAID_LISTEN_PENDING) {
			int oldest = -1;

			for (int i = 0; i < l->npending; i++)
				if (l->pending[i].lk->stage == STAGE_HELLO &&
				    now - l->pending[i].lk->opened_ns >
					    ms_to_ns(BRAID_LISTEN_EVICT_MS) &&
				    (oldest < 0 || l->pending[i].lk->opened_ns <
							   l->pending[oldest].lk->opened_ns))
					oldest = i;
			if (oldest < 0)
				return;
			drop_stranger(l, ops, oldest, "silent while the listener was full");
		}
		rc = braid_oob_accept(l->fd, &fd);
		if (rc == -EAGAIN)
			return;
		if (rc) {
			BRAID_INFO(NCCL_NET, "%s: listener %s: accept(2): %s", ops->who, l->addr,
				   strerror(-rc));
			return;
		}
		if (getpeername(fd, (struct sockaddr *)&addr, &alen) == 0)
			braid_oob_addr_str(&addr, peer, sizeof(peer));
		else
			snprintf(peer, sizeof(peer), "<unknown peer>");
		l->pending[l->npending].lk = link_new(fd, peer);
		if (!l->pending[l->npending].lk) {
			close(fd);
			return;
		}
		l->pending[l->npending].lk->stage = STAGE_HELLO;
		l->pending[l->npending].comm = NULL;
		l->npending++;
	}
}

/*
 * One step of pending connection i. 1: its comm is ready; 0: not yet (or it was dropped
 * as a stranger: *dropped set); <0: the real peer's set-up failed (WARNed).
 */
static int answer_step(struct braid_listener *l, const struct braid_link_ops *ops,
		       void *listen_comm, int i, int *dropped)
{
	struct braid_pending *p = &l->pending[i];
	struct braid_link *lk = p->lk;
	const void *payload = NULL;
	uint32_t len = 0;
	char why[200];
	int rc;

	*dropped = 0;
	if (lk->stage == STAGE_HELLO) {
		const struct wire_hello *hello;
		struct wire_reply reply;
		uint32_t rlen = sizeof(reply.blob);

		rc = braid_oob_chan_recv(&lk->chan, MSG_HELLO, &payload, &len, why, sizeof(why));
		if (rc == -EAGAIN && braid_now_ns() <= lk->deadline_ns)
			return 0;
		if (rc == -EAGAIN)
			snprintf(why, sizeof(why), "silent for %lld ms (BRAID_CONN_TIMEOUT_MS)",
				 (long long)braid_param_int(BRAID_P_CONN_TIMEOUT_MS));
		else if (rc == -ECONNRESET && lk->chan.rx_off == 0)
			snprintf(why, sizeof(why), "closed without a word (a port scan?)");
		else if (rc && rc != -EPROTO)
			snprintf(why, sizeof(why), "%s before a complete hello", strerror(-rc));
		hello = payload;
		if (!rc && (len < offsetof(struct wire_hello, blob) ||
			    ntohl(hello->blob_len) != len - offsetof(struct wire_hello, blob))) {
			snprintf(why, sizeof(why), "a hello of %u bytes, malformed", len);
			rc = -EPROTO;
		}
		if (!rc && hello->nonce != l->nonce) {
			snprintf(why, sizeof(why),
				 "it holds the handle of another listener (a rank "
				 "of an earlier job, or a replay)");
			rc = -EPROTO;
		}
		if (rc) {
			drop_stranger(l, ops, i, why);
			*dropped = 1;
			return 0;
		}
		/* From here on it is our peer: a failure is an error of the connection. */
		if (hello->backend != ops->kind) {
			BRAID_WARN("%s: accept on %s: peer %s uses another backend (%u); set the same "
				   "BRAID_BACKEND on every rank",
				   ops->who, l->addr, lk->peer, hello->backend);
			return -EPROTO;
		}
		rc = ops->answer(listen_comm, lk, hello->blob, ntohl(hello->blob_len), reply.blob,
				 &rlen, &p->comm);
		if (rc)
			return rc;
		reply.blob_len = htonl(rlen);
		braid_oob_chan_post(&lk->chan, MSG_REPLY, &reply,
				    (uint32_t)offsetof(struct wire_reply, blob) + rlen);
		lk->stage = STAGE_REPLY;
	}
	if (lk->stage == STAGE_REPLY) {
		rc = braid_oob_chan_flush(&lk->chan);
		if (rc == -EAGAIN)
			return past_deadline(lk, ops->who, "accept from");
		if (rc) {
			BRAID_WARN("%s: accept on %s: peer %s went away during set-up (%s)",
				   ops->who, l->addr, lk->peer, strerror(-rc));
			return rc;
		}
		lk->stage = STAGE_READY;
	}
	rc = braid_oob_chan_recv(&lk->chan, MSG_READY, &payload, &len, why, sizeof(why));
	if (rc == -EAGAIN)
		return past_deadline(lk, ops->who, "accept from");
	if (rc) {
		BRAID_WARN("%s: accept on %s: peer %s failed to finish set-up (%s)", ops->who,
			   l->addr, lk->peer, rc == -EPROTO ? why : strerror(-rc));
		return rc;
	}
	lk->stage = STAGE_UP;
	return 1;
}

ncclResult_t braid_listener_accept(struct braid_listener *l, const struct braid_link_ops *ops,
				   void *listen_comm, void **comm)
{
	take_new(l, ops);
	for (int i = 0; i < l->npending;) {
		int dropped, rc = answer_step(l, ops, listen_comm, i, &dropped);

		if (rc == 1) {
			*comm = l->pending[i].comm;
			l->pending[i] = l->pending[--l->npending];
			return ncclSuccess;
		}
		if (rc < 0) {
			drop_peer(l, ops, i);
			return braid_link_error(rc);
		}
		if (!dropped)
			i++;
	}
	return ncclSuccess;
}

void braid_listener_close(struct braid_listener *l, const struct braid_link_ops *ops)
{
	while (l->npending)
		drop_peer(l, ops, l->npending - 1);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

ncclResult_t braid_listen_comm_open(const struct braid_link_ops *ops, const struct braid_vdev *vd,
				    void *handle, struct braid_ctr_dev *ctr, void **listen_comm)
{
	int dev = vd->nic[0];
	struct braid_listen_comm *l = calloc(1, sizeof(*l));
	ncclResult_t rc;

	if (!l)
		return ncclSystemError;
	rc = braid_listener_open(&l->lsn, ops, dev, handle, ctr);
	if (rc != ncclSuccess) {
		free(l);
		return rc;
	}
	if (ops->handle_nics) {
		struct braid_handle h;
		char why[128];

		if (braid_handle_decode(handle, &h, why, sizeof(why))) {
			BRAID_WARN("%s: listen on device %d: our own handle: %s", ops->who, dev,
				   why);
			braid_listener_close(&l->lsn, ops);
			free(l);
			return ncclInternalError;
		}
		ops->handle_nics(vd, &h);
		braid_handle_encode(&h, handle);
	}
	l->dev = dev;
	l->vdev = *vd;
	l->magic = BRAID_MAGIC_LISTEN;
	*listen_comm = l;
	return ncclSuccess;
}

ncclResult_t braid_listen_comm_close(const struct braid_link_ops *ops, void *listen_comm)
{
	struct braid_listen_comm *l = to_listen_comm(listen_comm);

	braid_listener_close(&l->lsn, ops);
	l->magic = BRAID_MAGIC_DEAD;
	free(l);
	return ncclSuccess;
}

/* ---- after set-up ---- */

static void take_message(struct braid_link *lk, uint16_t type, const void *payload, uint32_t len)
{
	if (type == MSG_BYE && len == sizeof(struct wire_bye)) {
		const struct wire_bye *w = payload;

		lk->peer_bye.base = be64toh(w->base);
		lk->peer_bye.upto = be64toh(w->upto);
		for (int i = 0; i < BRAID_BYE_WINDOW / 64; i++)
			lk->peer_bye.bits[i] = be64toh(w->bits[i]);
		lk->bye_ns = braid_now_ns();
		lk->state = BRAID_LINK_BYE;
	} else if (type == MSG_PEER_ERROR && len == sizeof(struct wire_peer_error)) {
		const struct wire_peer_error *w = payload;

		lk->peer_code = (int)ntohl((uint32_t)w->code);
		snprintf(lk->peer_why, sizeof(lk->peer_why), "%.*s", (int)sizeof(w->why), w->why);
		lk->state = BRAID_LINK_FAILED;
	} else if (type == MSG_BACKEND && lk->on_msg && lk->state == BRAID_LINK_UP) {
		lk->on_msg(lk->msg_arg, payload, len);
	} else if (type == MSG_BACKEND && lk->state != BRAID_LINK_UP) {
		/* the peer's comm is closing: what it asked no longer matters */
	} else {
		snprintf(lk->peer_why, sizeof(lk->peer_why),
			 "protocol error: message type %u of %u bytes after set-up", type, len);
		lk->peer_code = ncclRemoteError;
		lk->state = BRAID_LINK_FAILED;
	}
}

enum braid_link_state braid_link_check_timed(struct braid_link *lk, int now)
{
	struct pollfd p = { .fd = lk->chan.fd, .events = POLLIN | POLLRDHUP };
	uint64_t t;

	if (lk->state == BRAID_LINK_DEAD || lk->state == BRAID_LINK_FAILED)
		return lk->state;
	t = braid_now_ns();
	if (!now && t < lk->next_check_ns)
		return lk->state;
	lk->next_check_ns = t + ms_to_ns(braid_param_int(BRAID_P_LIVENESS_MS));
	if (lk->chan.tx_off < lk->chan.tx_len) /* a message the socket would not take at once */
		braid_oob_chan_flush(&lk->chan);
	if (poll(&p, 1, 0) <= 0)
		return lk->state;
	/* What the peer said comes before its hang-up. */
	for (;;) {
		const void *payload;
		uint16_t type;
		uint32_t len;
		char why[160];
		int rc = braid_oob_chan_recv_any(&lk->chan, &type, &payload, &len, why,
						 sizeof(why));

		if (rc == -EAGAIN)
			break;
		if (rc == 0) {
			take_message(lk, type, payload, len);
			continue;
		}
		if (rc == -EPROTO && lk->state == BRAID_LINK_UP) {
			snprintf(lk->peer_why, sizeof(lk->peer_why), "protocol error: %s", why);
			lk->peer_code = ncclRemoteError;
			lk->state = BRAID_LINK_FAILED;
		} else if (lk->state == BRAID_LINK_UP) {
			lk->state = BRAID_LINK_DEAD; /* hung up without a goodbye */
		}
		return lk->state;
	}
	if (lk->state == BRAID_LINK_UP && (p.revents & (POLLERR | POLLHUP)))
		lk->state = BRAID_LINK_DEAD;
	return lk->state;
}

/* A goodbye, error report or backend message: small, on an idle socket; wait a moment for
 * room. 0 once it is out, else -errno. */
static int flush_until(struct braid_link *lk, uint64_t until)
{
	int rc;

	while ((rc = braid_oob_chan_flush(&lk->chan)) == -EAGAIN && braid_now_ns() < until) {
		struct pollfd p = { .fd = lk->chan.fd, .events = POLLOUT };

		poll(&p, 1, 10);
	}
	return rc;
}

static int post_and_flush(struct braid_link *lk, uint16_t type, const void *payload, uint32_t len)
{
	uint64_t until = braid_now_ns() + 100000000ULL;
	int rc;

	if (lk->chan.fd < 0)
		return -ENOTCONN;
	/* what an earlier message left staged goes first (else the post would be refused,
	 * and a goodbye lost) */
	rc = flush_until(lk, until);
	if (!rc)
		rc = braid_oob_chan_post(&lk->chan, type, payload, len);
	if (rc)
		return rc; /* nothing taken: the caller may repeat it */
	rc = flush_until(lk, until);
	/* taken: the rest goes at the next send or check (-EAGAIN: the caller sends it twice) */
	return rc == -EAGAIN ? 0 : rc;
}

int braid_link_send(struct braid_link *lk, const void *msg, uint32_t len)
{
	if (len > BRAID_LINK_BLOB)
		return -EMSGSIZE;
	return post_and_flush(lk, MSG_BACKEND, msg, len);
}

void braid_link_report_error(struct braid_link *lk, int code, const char *why)
{
	struct wire_peer_error w = { .code = (int32_t)htonl((uint32_t)code) };

	snprintf(w.why, sizeof(w.why), "%s", why);
	post_and_flush(lk, MSG_PEER_ERROR, &w, sizeof(w));
}

void braid_link_close(struct braid_link *lk, const struct braid_link_bye *bye)
{
	if (!lk)
		return;
	if (bye && lk->stage == STAGE_UP) {
		struct wire_bye w = { .base = htobe64(bye->base), .upto = htobe64(bye->upto) };

		for (int i = 0; i < BRAID_BYE_WINDOW / 64; i++)
			w.bits[i] = htobe64(bye->bits[i]);
		post_and_flush(lk, MSG_BYE, &w, sizeof(w));
	}
	link_free(lk);
}
