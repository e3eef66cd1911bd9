// SPDX-License-Identifier: Apache-2.0
/*
 * The contract: call patterns that NCCL's own transports accept and braid's first suites
 * never made. Each scenario names the NCCL behaviour it holds the plugin to
 * (docs/contract.md lists them all):
 *
 *   tag-order    isend with no free receive buffer for its tag yet: a NULL request, and
 *                the same call again later succeeds (net_ib p2p.cc, ncclIbIsend)
 *   truncate     a message larger than the posted buffer: delivered truncated, the send
 *                succeeds, test() reports what arrived (ncclIbIsend clamps the size)
 *   isolation    one comm's truncation and failure never touch another comm of the device
 *   reuse-close  one listen comm, 200 connections, closed in either order: no errors
 *   strangers    connections that are not a braid peer never fail accept (socket.cc,
 *                socketFinalizeAccept drops them and accepts again)
 *   flush        iflush on 64 comms at once never fails for lack of room (net_ib gives
 *                every receive comm its own flush QP)
 */
#include "tests/conformance/conf.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/pattern.h"

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A registered buffer for one comm. */
struct cbuf {
	char *p;
	size_t len;
	void *mh;
};

static int cbuf_get(struct side *s, void *comm, struct cbuf *b, size_t len)
{
	ncclResult_t r;

	b->len = len;
	b->mh = NULL;
	b->p = malloc(len ? len : 1);
	if (!b->p)
		return conf_fail(s, "malloc(%zu)", len);
	r = s->api->reg_mr(s->api, comm, b->p, len ? len : 1, &b->mh);
	if (r != ncclSuccess) {
		free(b->p);
		b->p = NULL;
		return conf_fail(s, "regMr(%zu bytes) returned %s (%d)", len, netapi_result_str(r),
				 r);
	}
	return 0;
}

static void cbuf_put(struct side *s, void *comm, struct cbuf *b)
{
	if (b->mh)
		s->api->dereg_mr(s->api, comm, b->mh);
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- tag-order ---- */

#define TO_GROUPS 40
#define TO_MAX_SIZE (64 << 10)

/*
 * Grouped receives of n buffers with tags 0..n-1. The sender tries each group's sends in
 * the order 0, n-1, 1, ..., n-2 (unrelated to the group's order), and right after each
 * one it already tries the same tag for the next group, which has no free buffer yet:
 * NCCL's IB transport answers such an isend with a NULL request and NCCL calls it again.
 * Two sends with one tag still go out in order, as NCCL's do.
 */
int sc_tag_order(struct side *s)
{
	int n = s->props.max_recvs < XFER_MAX_GROUP ? s->props.max_recvs : XFER_MAX_GROUP;
	static size_t size[TO_GROUPS][XFER_MAX_GROUP];
	static void *req[TO_GROUPS][XFER_MAX_GROUP];
	static bool posted[TO_GROUPS][XFER_MAX_GROUP], fin[TO_GROUPS][XFER_MAX_GROUP];
	int order[XFER_MAX_GROUP], ndone = 0, nnull = 0, ret = -1;
	bool receiver = s->role == 'a';
	void *lc = NULL, *rc = NULL, *sc = NULL, *comm;
	double last = now_s();
	uint64_t st = s->seed;
	struct cbuf arena = { 0 };

	memset(req, 0, sizeof(req));
	memset(posted, 0, sizeof(posted));
	memset(fin, 0, sizeof(fin));
	for (int g = 0; g < TO_GROUPS; g++)
		for (int i = 0; i < n; i++)
			size[g][i] = prng_range(&st, 0, 4) == 0 ? 0
								: prng_range(&st, 1, TO_MAX_SIZE);
	order[0] = 0;
	if (n > 1)
		order[1] = n - 1;
	for (int k = 2; k < n; k++)
		order[k] = k - 1;
	if (receiver ? link_accept(s, s->ctx, "to", &lc, &rc) : link_connect(s, s->ctx, "to", &sc))
		goto out;
	comm = receiver ? rc : sc;
	if (cbuf_get(s, comm, &arena, (size_t)TO_GROUPS * XFER_MAX_GROUP * TO_MAX_SIZE))
		goto out;
#define TO_BUF(g, i) (arena.p + ((size_t)(g)*XFER_MAX_GROUP + (i)) * TO_MAX_SIZE)
	for (int g = 0; g < TO_GROUPS; g++)
		for (int i = 0; i < n; i++)
			if (receiver)
				memset(TO_BUF(g, i), 0xee, TO_MAX_SIZE);
			else
				pattern_fill(TO_BUF(g, i), size[g][i], s->seed,
					     (uint64_t)g * 8 + i);
	conf_step(s, "%s %d groups of %d", receiver ? "receiving" : "sending out of group order",
		  TO_GROUPS, n);
	while (ndone < TO_GROUPS * (receiver ? 1 : n)) {
		bool progress = false;
		ncclResult_t r;

		if (receiver) {
			/* post groups in order, at most 32 in flight */
			for (int g = 0; g < TO_GROUPS; g++) {
				void *data[XFER_MAX_GROUP], *mh[XFER_MAX_GROUP];
				int tags[XFER_MAX_GROUP];
				size_t caps[XFER_MAX_GROUP];
				int inflight = 0;

				if (posted[g][0])
					continue;
				for (int h = 0; h < g; h++)
					inflight += posted[h][0] && !fin[h][0];
				if (inflight >= NCCL_NET_MAX_REQUESTS)
					break;
				for (int i = 0; i < n; i++) {
					data[i] = TO_BUF(g, i);
					mh[i] = arena.mh;
					tags[i] = i;
					caps[i] = TO_MAX_SIZE;
				}
				r = s->api->irecv(s->api, comm, n, data, caps, tags, mh,
						  &req[g][0]);
				if (r != ncclSuccess) {
					conf_fail(s, "irecv(group %d) returned %s (%d)", g,
						  netapi_result_str(r), r);
					goto out;
				}
				if (!req[g][0])
					break;
				posted[g][0] = true;
				progress = true;
				break; /* one per pass: groups are posted in order */
			}
			for (int g = 0; g < TO_GROUPS; g++) {
				int sizes[XFER_MAX_GROUP], done = 0;

				if (!posted[g][0] || fin[g][0])
					continue;
				r = s->api->test(s->api, req[g][0], &done, sizes);
				if (r != ncclSuccess) {
					conf_fail(s, "test(group %d) returned %s (%d)", g,
						  netapi_result_str(r), r);
					goto out;
				}
				if (!done)
					continue;
				for (int i = 0; i < n; i++) {
					size_t bad = pattern_check(TO_BUF(g, i), size[g][i],
								   s->seed, (uint64_t)g * 8 + i);

					if (sizes[i] != (int)size[g][i] || bad != (size_t)-1) {
						conf_fail(s,
							  "group %d buffer %d (tag %d): size %d, "
							  "expected %zu; first wrong byte %zd",
							  g, i, i, sizes[i], size[g][i],
							  (ssize_t)bad);
						goto out;
					}
				}
				fin[g][0] = true;
				ndone++;
				progress = true;
			}
		} else {
			int g0 = 0, inflight = 0;

			/* the lowest group not all sent, and the next one, prematurely */
			for (bool all = true; all && g0 < TO_GROUPS; g0 += all)
				for (int i = 0; i < n; i++)
					all &= posted[g0][i];
			for (int g = 0; g < TO_GROUPS; g++)
				for (int i = 0; i < n; i++)
					inflight += posted[g][i] && !fin[g][i];
			for (int k = 0; k < n && g0 < TO_GROUPS; k++) {
				for (int g = g0; g <= g0 + 1 && g < TO_GROUPS; g++) {
					int i = order[k];

					/* one tag's sends go out in order, as NCCL's do */
					if (posted[g][i] || (g > 0 && !posted[g - 1][i]) ||
					    inflight >= NCCL_NET_MAX_REQUESTS * XFER_MAX_GROUP)
						continue;
					r = s->api->isend(s->api, comm, TO_BUF(g, i), size[g][i], i,
							  arena.mh, &req[g][i]);
					if (r != ncclSuccess) {
						conf_fail(s,
							  "isend(group %d, tag %d) returned %s (%d)%s",
							  g, i, netapi_result_str(r), r,
							  g > g0 ? ": no free buffer with this tag yet; "
								   "NCCL expects a NULL request"
								 : "");
						goto out;
					}
					if (!req[g][i]) {
						nnull++;
						continue;
					}
					posted[g][i] = true;
					inflight++;
					progress = true;
				}
			}
			for (int g = 0; g < TO_GROUPS; g++)
				for (int i = 0; i < n; i++) {
					int sizes[1], done = 0;

					if (!posted[g][i] || fin[g][i])
						continue;
					r = s->api->test(s->api, req[g][i], &done, sizes);
					if (r != ncclSuccess) {
						conf_fail(s,
							  "test(send group %d tag %d) returned %s (%d)",
							  g, i, netapi_result_str(r), r);
						goto out;
					}
					if (done) {
						fin[g][i] = true;
						ndone++;
						progress = true;
					}
				}
		}
		if (progress) {
			last = now_s();
			continue;
		}
		if (now_s() - last > CONF_XFER_TIMEOUT_S) {
			conf_fail(s, "no progress for %.0f s (%d done)", CONF_XFER_TIMEOUT_S,
				  ndone);
			goto out;
		}
		idle_wait();
	}
#undef TO_BUF
	if (!receiver)
		conf_log(s,
			 "%d sends in shuffled tag order, %d premature isends answered 'not now'",
			 TO_GROUPS * n, nnull);
	ret = rdv_sync(s, "to-done");
out:
	if (arena.p)
		cbuf_put(s, receiver ? rc : sc, &arena);
	if (close_comms(s, sc, rc, lc))
		ret = -1;
	return ret;
}

/* ---- truncate ---- */

/* Messages larger than their receive buffers, alone and inside a grouped receive, then
 * an ordinary one: the comm goes on. */
static void plan_truncate(struct xfer_plan *p)
{
	static const struct {
		size_t size, cap;
		int group; /* messages with the same group number share one irecv */
	} m[] = {
		{ 8192, 100, 0 },    { 1 << 20, (1 << 20) - 1, 1 },
		{ 65536, 0, 2 },     { (5 << 20) + 3, (3 << 20) + 5, 3 },
		{ 300, 299, 4 },     { 4096, 4096, 5 },
		{ 70000, 1000, 5 },  { 17, 64, 5 },
		{ 12345, 12345, 6 },
	};
	int nm = sizeof(m) / sizeof(m[0]);

	memset(p, 0, sizeof(*p));
	p->msgs = calloc(nm, sizeof(*p->msgs));
	p->groups = calloc(nm, sizeof(*p->groups));
	if (!p->msgs || !p->groups)
		abort();
	p->nmsgs = nm;
	p->recv_window = NCCL_NET_MAX_REQUESTS;
	p->send_window = NCCL_NET_MAX_REQUESTS;
	p->inflight_bytes = 64 << 20;
	for (int i = 0; i < nm; i++) {
		struct xfer_group *g = &p->groups[m[i].group];

		p->msgs[i] = (struct xfer_msg){ .id = 1000 + i,
						.size = m[i].size,
						.cap = m[i].cap,
						.tag = 3 + g->n };
		if (!g->n)
			g->first = i;
		g->send_order[g->n] = g->n;
		g->n++;
		if (m[i].group + 1 > p->ngroups)
			p->ngroups = m[i].group + 1;
	}
}

int sc_truncate(struct side *s)
{
	struct xfer_plan p;
	int rc;

	plan_truncate(&p);
	rc = one_way_plan(s, s->ctx, "trunc", &p);
	plan_free(&p);
	return rc;
}

/* ---- isolation ---- */

struct iso_arg {
	struct side s;
	int which; /* 0: the bulk stream on comm B; 1: truncation and failure on comm A */
	int rc;
};

/* Comm A: truncated messages, then the sender closes with receives still posted: the
 * two whose data was sent complete, the two that can never come fail. */
static int iso_victim(struct side *s)
{
	bool receiver = s->role == 'a';
	void *lc = NULL, *rc = NULL, *sc = NULL;
	struct cbuf b[4] = { 0 };
	void *req[4] = { 0 };
	struct xfer_plan p;
	int ret = -1;

	plan_truncate(&p);
	if (one_way_plan(s, s->ctx, "isoA-trunc", &p)) {
		plan_free(&p);
		return -1;
	}
	plan_free(&p);
	if (receiver ? link_accept(s, s->ctx, "isoA", &lc, &rc)
		     : link_connect(s, s->ctx, "isoA", &sc))
		goto out;
	for (int i = 0; i < 4; i++)
		if (cbuf_get(s, receiver ? rc : sc, &b[i], 65536))
			goto out;
	if (receiver) {
		int state[4] = { 0 }, left = 4; /* 0 waiting, 1 done, 2 failed */
		double t0;

		for (int i = 0; i < 4; i++) {
			int tag = 1;
			size_t cap = 65536;
			void *data = b[i].p;

			while (!req[i]) {
				ncclResult_t r = s->api->irecv(s->api, rc, 1, &data, &cap, &tag,
							       &b[i].mh, &req[i]);
				if (r != ncclSuccess) {
					conf_fail(s, "irecv #%d returned %s (%d)", i,
						  netapi_result_str(r), r);
					goto out;
				}
				if (!req[i])
					idle_wait();
			}
		}
		if (rdv_sync(s, "isoA-posted"))
			goto out;
		conf_step(s, "comm A: 4 receives posted; the sender sends 2 and closes");
		t0 = now_s();
		while (left && now_s() - t0 < CONF_ERROR_BOUND_S) {
			for (int i = 0; i < 4; i++) {
				int done = 0, size = -1;
				ncclResult_t r;

				if (state[i])
					continue;
				r = s->api->test(s->api, req[i], &done, &size);
				if (r != ncclSuccess) {
					conf_log(s, "comm A receive #%d: %s (%d) after %.2f s", i,
						 netapi_result_str(r), r, now_s() - t0);
					state[i] = 2;
					left--;
				} else if (done) {
					if (size != 65536 || pattern_check(b[i].p, 65536, s->seed,
									   77 + i) != (size_t)-1) {
						conf_fail(s,
							  "comm A receive #%d: size %d or data wrong",
							  i, size);
						goto out;
					}
					state[i] = 1;
					left--;
				}
			}
			idle_wait();
		}
		if (left) {
			conf_fail(s,
				  "comm A: %d receive(s) neither done nor failed %.0f s after the "
				  "sender closed",
				  left, CONF_ERROR_BOUND_S);
			goto out;
		}
		if (state[0] != 1 || state[1] != 1) {
			conf_fail(s,
				  "comm A: the two messages sent before the peer closed must "
				  "complete (states %d %d: 1 done, 2 failed)",
				  state[0], state[1]);
			goto out;
		}
		if (state[2] != 2 || state[3] != 2) {
			conf_fail(s,
				  "comm A: the two receives never sent to must fail (states "
				  "%d %d)",
				  state[2], state[3]);
			goto out;
		}
		ret = 0;
	} else {
		if (rdv_sync(s, "isoA-posted"))
			goto out;
		for (int i = 0; i < 2; i++) {
			int done = 0, size;
			double t0 = now_s();

			pattern_fill(b[i].p, 65536, s->seed, 77 + i);
			while (!req[i]) {
				ncclResult_t r = s->api->isend(s->api, sc, b[i].p, 65536, 1,
							       b[i].mh, &req[i]);
				if (r != ncclSuccess || now_s() - t0 > CONF_XFER_TIMEOUT_S) {
					conf_fail(s, "isend #%d returned %s (%d)", i,
						  netapi_result_str(r), r);
					goto out;
				}
			}
			while (!done) {
				ncclResult_t r = s->api->test(s->api, req[i], &done, &size);

				if (r != ncclSuccess || now_s() - t0 > CONF_XFER_TIMEOUT_S) {
					conf_fail(s, "test(isend #%d) returned %s (%d)", i,
						  netapi_result_str(r), r);
					goto out;
				}
				idle_wait();
			}
		}
		conf_log(s, "comm A: 2 of the 4 messages sent; closing the send comm now");
		ret = 0;
	}
out:
	for (int i = 0; i < 4; i++)
		if (b[i].p)
			cbuf_put(s, receiver ? rc : sc, &b[i]);
	if (close_comms(s, sc, rc, lc))
		ret = -1;
	return ret;
}

static void *iso_thread(void *argp)
{
	struct iso_arg *t = argp;

	if (t->which == 0) {
		struct xfer_plan p;

		/* 1 GiB, 4 MiB at a time, every byte verified */
		plan_fixed(&p, 256, 4 << 20, 4 << 20, 5000);
		t->rc = one_way_plan(&t->s, t->s.ctx, "isoB", &p);
		plan_free(&p);
	} else {
		t->rc = iso_victim(&t->s);
	}
	return NULL;
}

int sc_isolation(struct side *s)
{
	struct iso_arg t[2];
	pthread_t th[2];
	int rc = 0;

	for (int i = 0; i < 2; i++) {
		t[i].s = *s;
		t[i].which = i;
		t[i].rc = -1;
		if (pthread_create(&th[i], NULL, iso_thread, &t[i])) {
			for (int j = 0; j < i; j++)
				pthread_join(th[j], NULL);
			return conf_fail(s, "pthread_create");
		}
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		rc |= t[i].rc;
	}
	if (!rc)
		conf_log(s, "comm B moved 1 GiB, verified, while comm A truncated and failed");
	return rc ? -1 : 0;
}

/* ---- reuse-close ---- */

#define RC_ROUNDS 200
#define RC_MSGS 4

/*
 * One listen comm; each round a new connection moves RC_MSGS messages and both sides close
 * as soon as their own requests are done, without waiting for each other. Odd rounds the
 * receiver finishes first (the sender starts testing a moment later), even rounds the
 * sender. Every byte arrives, so no call may report an error. A second connection stays
 * open throughout, as NCCL's other comms would: the device's endpoint is not reopened
 * every round.
 */
int sc_reuse_close(struct side *s)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	bool receiver = s->role == 'a';
	void *lc = NULL, *klc = NULL, *krc = NULL, *ksc = NULL;
	uint64_t st = s->seed;
	int ret = -1;
	ncclResult_t r;

	/* look at the peer on every call, so that a close is seen at the worst moment */
	setenv("BRAID_LIVENESS_MS", "1", 0);
	conf_step(s, "init");
	r = s->api->init(s->api, &s->ctx, s->seed);
	if (r != ncclSuccess)
		return conf_fail(s, "init returned %s (%d)", netapi_result_str(r), r);
	if (link_share_listener(s, receiver, "reuse", handle, &lc))
		goto out;
	if (receiver ? link_accept(s, s->ctx, "keep", &klc, &krc)
		     : link_connect(s, s->ctx, "keep", &ksc))
		goto out;
	for (int round = 0; round < RC_ROUNDS; round++) {
		char h[NCCL_NET_HANDLE_MAXSIZE];
		bool recv_first = round & 1;
		void *comm = NULL, *req[RC_MSGS] = { 0 };
		struct cbuf b[RC_MSGS] = { 0 };
		size_t size[RC_MSGS];
		bool fin[RC_MSGS] = { 0 };
		double t0 = now_s();
		int left = RC_MSGS;

		for (int i = 0; i < RC_MSGS; i++)
			size[i] = prng_range(&st, 0, 3) == 0 ? prng_range(&st, 0, 64)
							     : prng_range(&st, 1, 1 << 20);
		conf_step(s, "round %d: %s", round, receiver ? "accept" : "connect");
		/* NCCL gives each connection its own copy of the handle, kept across calls */
		memcpy(h, handle, sizeof(h));
		while (!comm) {
			r = receiver ? s->api->accept(s->api, lc, &comm)
				     : s->api->connect(s->api, s->ctx, s->dev, h, &comm);

			if (r != ncclSuccess) {
				conf_fail(s, "round %d: %s returned %s (%d)", round,
					  receiver ? "accept" : "connect", netapi_result_str(r), r);
				goto out;
			}
			if (!comm) {
				if (now_s() - t0 > CONF_CONNECT_TIMEOUT_S) {
					conf_fail(s, "round %d: not connected after %.0f s", round,
						  CONF_CONNECT_TIMEOUT_S);
					goto out;
				}
				idle_wait();
			}
		}
		for (int i = 0; i < RC_MSGS; i++) {
			if (cbuf_get(s, comm, &b[i], size[i] + 1))
				goto round_fail;
			if (!receiver)
				pattern_fill(b[i].p, size[i], s->seed, (uint64_t)round * 16 + i);
		}
		conf_step(s, "round %d: %s (%s closes first)", round,
			  receiver ? "receiving" : "sending", recv_first ? "receiver" : "sender");
		for (int i = 0; i < RC_MSGS; i++) {
			while (!req[i]) {
				int tag = 9;
				void *data = b[i].p;
				size_t cap = size[i] + 1;

				r = receiver ? s->api->irecv(s->api, comm, 1, &data, &cap, &tag,
							     &b[i].mh, &req[i])
					     : s->api->isend(s->api, comm, b[i].p, size[i], tag,
							     b[i].mh, &req[i]);
				if (r != ncclSuccess) {
					conf_fail(s, "round %d: %s #%d returned %s (%d)", round,
						  receiver ? "irecv" : "isend", i,
						  netapi_result_str(r), r);
					goto round_fail;
				}
				if (!req[i]) {
					if (now_s() - t0 > CONF_XFER_TIMEOUT_S) {
						conf_fail(s, "round %d: #%d not taken", round, i);
						goto round_fail;
					}
					idle_wait();
				}
			}
		}
		/* the side that closes second starts testing a little later */
		if (receiver != recv_first)
			sleep_ms(round % 3);
		while (left) {
			for (int i = 0; i < RC_MSGS; i++) {
				int done = 0, got = -1;

				if (fin[i])
					continue;
				r = s->api->test(s->api, req[i], &done, &got);
				if (r != ncclSuccess) {
					conf_fail(s,
						  "round %d (%s closes first): test(%s #%d) returned "
						  "%s (%d), yet every byte was sent and received",
						  round, recv_first ? "receiver" : "sender",
						  receiver ? "irecv" : "isend", i,
						  netapi_result_str(r), r);
					goto round_fail;
				}
				if (!done)
					continue;
				if (receiver &&
				    (got != (int)size[i] ||
				     pattern_check(b[i].p, size[i], s->seed,
						   (uint64_t)round * 16 + i) != (size_t)-1)) {
					conf_fail(s,
						  "round %d: message %d: size %d (sent %zu) or data "
						  "wrong",
						  round, i, got, size[i]);
					goto round_fail;
				}
				fin[i] = true;
				left--;
			}
			if (left && now_s() - t0 > CONF_XFER_TIMEOUT_S) {
				conf_fail(s, "round %d: %d request(s) not done", round, left);
				goto round_fail;
			}
			if (left)
				idle_wait();
		}
		for (int i = 0; i < RC_MSGS; i++)
			cbuf_put(s, comm, &b[i]);
		if (close_comms(s, receiver ? NULL : comm, receiver ? comm : NULL, NULL))
			goto out;
		continue;
round_fail:
		for (int i = 0; i < RC_MSGS; i++)
			if (b[i].p)
				cbuf_put(s, comm, &b[i]);
		close_comms(s, receiver ? NULL : comm, receiver ? comm : NULL, NULL);
		goto out;
	}
	conf_log(s, "%d connections through one listen comm, closed in either order: no error",
		 RC_ROUNDS);
	ret = rdv_sync(s, "reuse-done");
out:
	if (close_comms(s, ksc, krc, klc))
		ret = -1;
	if (lc && close_comms(s, NULL, NULL, lc))
		ret = -1;
	conf_step(s, "finalize");
	r = s->api->finalize(s->api, s->ctx);
	if (r != ncclSuccess)
		ret = conf_fail(s, "finalize returned %s (%d)", netapi_result_str(r), r);
	return ret;
}

/* ---- strangers ---- */

/* Socket inodes of this process's listening TCP sockets (LISTEN is state 0A). */
static int listening_inodes(unsigned long *ino, int max)
{
	static const char *const tables[] = { "/proc/self/net/tcp", "/proc/self/net/tcp6" };
	unsigned long mine[1024];
	int nmine = 0, n = 0;
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");

	if (!d)
		return 0;
	while ((e = readdir(d)) && nmine < 1024) {
		char path[300], link[64];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &mine[nmine]) == 1)
			nmine++;
	}
	closedir(d);
	for (int t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "r");
		char line[512];

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long inode;
			unsigned st;

			if (sscanf(line, " %*d: %*s %*s %x %*s %*s %*s %*s %*s %lu", &st, &inode) !=
				    2 ||
			    st != 0x0a)
				continue;
			for (int i = 0; i < nmine && n < max; i++)
				if (mine[i] == inode)
					ino[n++] = inode;
		}
		fclose(f);
	}
	return n;
}

/* The address of the listening socket with this inode, as a port scanner would find it. */
static int listen_addr_of(unsigned long inode, struct sockaddr_storage *ss)
{
	static const char *const tables[] = { "/proc/self/net/tcp", "/proc/self/net/tcp6" };

	memset(ss, 0, sizeof(*ss));
	for (int t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "r");
		char line[512], addr[64];
		unsigned port;
		unsigned long ino;

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %*s %*s %*s %*s %*s %*s %lu",
				   addr, &port, &ino) != 3 ||
			    ino != inode)
				continue;
			fclose(f);
			if (t == 0) {
				struct sockaddr_in *sin = (struct sockaddr_in *)ss;

				sin->sin_family = AF_INET;
				sin->sin_port = htons((uint16_t)port);
				sin->sin_addr.s_addr = (in_addr_t)strtoul(addr, NULL, 16);
			} else {
				struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

				sin6->sin6_family = AF_INET6;
				sin6->sin6_port = htons((uint16_t)port);
				for (int w = 0; w < 4; w++) {
					char word[9];
					uint32_t v;

					memcpy(word, addr + 8 * w, 8);
					word[8] = '\0';
					v = (uint32_t)strtoul(word, NULL, 16);
					memcpy(&sin6->sin6_addr.s6_addr[4 * w], &v, 4);
				}
			}
			return 0;
		}
		fclose(f);
	}
	return -1;
}

enum stranger_kind {
	ST_SCAN,
	ST_RESET,
	ST_GARBAGE,
	ST_HANDLE,
	ST_HTTP,
	ST_IDLE,
	ST_TRICKLE,
	ST_COUNT
};
static const char *const stranger_name[ST_COUNT] = {
	"port scan (connect, close)",
	"connect then RST",
	"300 random bytes",
	"the 128 handle bytes replayed raw",
	"an HTTP request",
	"idle, never speaks",
	"one byte, then silence",
};

static int stranger(const struct sockaddr_storage *ss, enum stranger_kind k,
		    const unsigned char *handle, uint64_t *st)
{
	socklen_t len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
						 : sizeof(struct sockaddr_in6);
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned char junk[300];

	if (fd < 0 || connect(fd, (const struct sockaddr *)ss, len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	switch (k) {
	case ST_SCAN: close(fd); return -2;
	case ST_RESET: {
		struct linger lg = { 1, 0 };

		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd);
		return -2;
	}
	case ST_GARBAGE:
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (unsigned char)prng_next(st);
		if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) < 0)
			break;
		break;
	case ST_HANDLE:
		if (send(fd, handle, NCCL_NET_HANDLE_MAXSIZE, MSG_NOSIGNAL) < 0)
			break;
		break;
	case ST_HTTP: {
		static const char get[] = "GET / HTTP/1.0\r\n\r\n";

		if (send(fd, get, sizeof(get) - 1, MSG_NOSIGNAL) < 0)
			break;
		break;
	}
	case ST_TRICKLE:
		if (send(fd, "b", 1, MSG_NOSIGNAL) < 0)
			break;
		break;
	default: break;
	}
	return fd;
}

/* The real peer's connection k moves a stream (a receives, b sends), then closes. */
static int stranger_data(struct side *s, void *comm, int k)
{
	bool sender = s->role == 'b';
	struct xfer_plan p;
	struct xfer x;
	char name[32];
	int xr;

	plan_stream(&p, s->seed + k, 20, 256 << 10, false);
	snprintf(name, sizeof(name), "st-data%d", k);
	xr = xfer_run(&x, s, comm, &p, sender);
	xfer_dereg(&x);
	if (close_comms(s, sender ? comm : NULL, sender ? NULL : comm, NULL))
		xr = -1;
	xfer_free(&x);
	plan_free(&p);
	return xr || rdv_sync(s, name) ? -1 : 0;
}

/*
 * Strangers reach the listen port before the real peer: a port scan, a reset, garbage, a
 * replayed handle, an HTTP probe, an idle connection and a trickle. accept() must never
 * fail because of them, nor wait for them: the real peer is accepted at once, twice, and
 * its data arrives. NCCL's socket layer behaves so (socketFinalizeAccept).
 */
int sc_strangers(struct side *s)
{
	bool receiver = s->role == 'a';
	unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct sockaddr_storage ss;
	int fds[ST_COUNT], ret = -1;
	void *lc = NULL;

	for (int i = 0; i < ST_COUNT; i++)
		fds[i] = -1;
	if (receiver) {
		unsigned long before[16], after[16], ino = 0;
		int nb = listening_inodes(before, 16), na;
		ncclResult_t r;

		memset(handle, 0, sizeof(handle));
		r = s->api->listen(s->api, s->ctx, s->dev, handle, &lc);
		if (r != ncclSuccess || !lc)
			return conf_fail(s, "listen returned %s (%d)", netapi_result_str(r), r);
		na = listening_inodes(after, 16);
		for (int i = 0; i < na && !ino; i++) {
			bool old = false;

			for (int j = 0; j < nb; j++)
				old |= before[j] == after[i];
			if (!old)
				ino = after[i];
		}
		if (!ino || listen_addr_of(ino, &ss)) {
			conf_fail(s, "cannot find the plugin's listening socket in /proc/self/net");
			goto out;
		}
		if (rdv_put(s, "st-handle", handle, sizeof(handle)) ||
		    rdv_put(s, "st-addr", &ss, sizeof(ss)))
			goto out;
		/* the strangers are queued first */
		if (rdv_get(s, "st-in", NULL, 0, CONF_RDV_TIMEOUT_S))
			goto out;
		for (int k = 0; k < 2; k++) {
			unsigned long warns = netapi_warn_count();
			double t0 = now_s();
			void *rc = NULL;

			conf_step(s, "accept #%d behind %d strangers", k + 1, ST_COUNT);
			while (!rc) {
				r = s->api->accept(s->api, lc, &rc);
				if (r != ncclSuccess) {
					conf_fail(s,
						  "accept returned %s (%d): a connection that is not a "
						  "braid peer must be dropped, not fail accept",
						  netapi_result_str(r), r);
					goto out;
				}
				if (!rc && now_s() - t0 > 10.0) {
					conf_fail(s,
						  "accept #%d not done after 10 s: strangers delay "
						  "the real peer",
						  k + 1);
					goto out;
				}
				if (!rc)
					idle_wait();
			}
			conf_log(s, "accept #%d: the real peer after %.3f s, %lu new WARN line(s)",
				 k + 1, now_s() - t0, netapi_warn_count() - warns);
			if (netapi_warn_count() != warns) {
				close_comms(s, NULL, rc, NULL);
				conf_fail(s,
					  "strangers got WARN lines: they are no error (INFO only)");
				goto out;
			}
			if (stranger_data(s, rc, k))
				goto out;
		}
		ret = 0;
	} else {
		uint64_t st = s->seed;

		if (rdv_get(s, "st-handle", handle, sizeof(handle), CONF_RDV_TIMEOUT_S) ||
		    rdv_get(s, "st-addr", &ss, sizeof(ss), CONF_RDV_TIMEOUT_S))
			return -1;
		for (int i = 0; i < ST_COUNT; i++) {
			fds[i] = stranger(&ss, (enum stranger_kind)i, handle, &st);
			if (fds[i] == -1) {
				conf_fail(s, "stranger '%s' could not connect", stranger_name[i]);
				goto out;
			}
			conf_log(s, "stranger: %s", stranger_name[i]);
		}
		if (rdv_put(s, "st-in", "", 0))
			goto out;
		for (int k = 0; k < 2; k++) {
			char h[NCCL_NET_HANDLE_MAXSIZE];
			double t0 = now_s();
			void *sc = NULL;

			memcpy(h, handle, sizeof(h));
			conf_step(s, "connect #%d behind the strangers", k + 1);
			while (!sc) {
				ncclResult_t r = s->api->connect(s->api, s->ctx, s->dev, h, &sc);

				if (r != ncclSuccess || now_s() - t0 > 10.0) {
					conf_fail(s, "connect #%d returned %s (%d) after %.1f s",
						  k + 1, netapi_result_str(r), r, now_s() - t0);
					goto out;
				}
				if (!sc)
					idle_wait();
			}
			if (stranger_data(s, sc, k))
				goto out;
		}
		ret = 0;
	}
out:
	for (int i = 0; i < ST_COUNT; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (lc && close_comms(s, NULL, NULL, lc))
		ret = -1;
	return ret;
}

/* ---- flush ---- */

#define FL_COMMS 64
#define FL_MSGS 32
#define FL_SIZE 1024

/* The backend's flush knob: both backends read every receive back when it says always. */
static const char *flush_knob(void)
{
	const char *be = getenv("BRAID_BACKEND");

	return !be                  ? NULL
	       : !strcmp(be, "ib")  ? "BRAID_IB_FLUSH"
	       : !strcmp(be, "ofi") ? "BRAID_OFI_FLUSH"
				    : NULL;
}

static bool flush_promised(void)
{
	const char *knob = flush_knob(), *v = knob ? getenv(knob) : NULL;

	return v && !strcmp(v, "always");
}

/* An iflush of every receive of every comm, none tested; 0, or -1 after a FAIL line.
 * *nflush counts the requests returned. */
static int flush_every_receive(struct side *s, void *const *comm, struct cbuf *buf,
			       void *freq[][FL_MSGS], int *nflush)
{
	for (int c = 0; c < FL_COMMS; c++)
		for (int m = 0; m < FL_MSGS; m++) {
			void *data = buf[c].p + m * FL_SIZE;
			int size = FL_SIZE;
			ncclResult_t r = s->api->iflush(s->api, comm[c], 1, &data, &size,
							&buf[c].mh, &freq[c][m]);

			if (r != ncclSuccess)
				return conf_fail(s,
						 "iflush on comm %d (#%d, %d flushes in flight) "
						 "returned %s (%d)",
						 c, m, *nflush, netapi_result_str(r), r);
			*nflush += freq[c][m] != NULL;
		}
	return 0;
}

/*
 * 64 receive comms, each with 32 receives done, then an iflush for every one of them,
 * all in flight at once before any is tested. BRAID_IB_FLUSH=always and
 * BRAID_OFI_FLUSH=always make the backends flush host memory too (without a GPU nothing
 * else would), so under BRAID_BACKEND=ib or ofi every iflush must return a request;
 * otherwise a backend with nothing to flush answers with NULL requests, which NCCL allows.
 * Then as many flushes again, left untested through deregMr and close, as ncclCommAbort
 * leaves them.
 */
int sc_flush(struct side *s)
{
	bool receiver = s->role == 'a';
	static char handles[FL_COMMS][NCCL_NET_HANDLE_MAXSIZE];
	static void *lc[FL_COMMS], *comm[FL_COMMS], *req[FL_COMMS][FL_MSGS];
	static void *freq[FL_COMMS][FL_MSGS];
	static struct cbuf buf[FL_COMMS];
	int ret = -1, nflush = 0, left;
	double t0;
	ncclResult_t r;

	setenv("BRAID_IB_FLUSH", "always", 0);
	setenv("BRAID_OFI_FLUSH", "always", 0);
	conf_step(s, "init");
	r = s->api->init(s->api, &s->ctx, s->seed);
	if (r != ncclSuccess)
		return conf_fail(s, "init returned %s (%d)", netapi_result_str(r), r);
	memset(lc, 0, sizeof(lc));
	memset(comm, 0, sizeof(comm));
	memset(req, 0, sizeof(req));
	memset(freq, 0, sizeof(freq));
	memset(buf, 0, sizeof(buf));
	conf_step(s, "%s %d comms", receiver ? "accepting" : "connecting", FL_COMMS);
	if (receiver) {
		for (int c = 0; c < FL_COMMS; c++) {
			memset(handles[c], 0, sizeof(handles[c]));
			r = s->api->listen(s->api, s->ctx, s->dev, handles[c], &lc[c]);
			if (r != ncclSuccess || !lc[c]) {
				conf_fail(s, "listen #%d returned %s (%d)", c, netapi_result_str(r),
					  r);
				goto out;
			}
		}
		if (rdv_put(s, "fl-handles", handles, sizeof(handles)))
			goto out;
	} else if (rdv_get(s, "fl-handles", handles, sizeof(handles), CONF_RDV_TIMEOUT_S)) {
		goto out;
	}
	t0 = now_s();
	left = FL_COMMS;
	while (left) {
		for (int c = 0; c < FL_COMMS; c++) {
			if (comm[c])
				continue;
			r = receiver
				    ? s->api->accept(s->api, lc[c], &comm[c])
				    : s->api->connect(s->api, s->ctx, s->dev, handles[c], &comm[c]);
			if (r != ncclSuccess) {
				conf_fail(s, "%s #%d returned %s (%d)",
					  receiver ? "accept" : "connect", c, netapi_result_str(r),
					  r);
				goto out;
			}
			left -= comm[c] != NULL;
		}
		if (left && now_s() - t0 > CONF_CONNECT_TIMEOUT_S * 2) {
			conf_fail(s, "%d comms not connected", left);
			goto out;
		}
		if (left)
			idle_wait();
	}
	for (int c = 0; c < FL_COMMS; c++) {
		if (cbuf_get(s, comm[c], &buf[c], FL_MSGS * FL_SIZE))
			goto out;
		if (!receiver)
			for (int m = 0; m < FL_MSGS; m++)
				pattern_fill(buf[c].p + m * FL_SIZE, FL_SIZE, s->seed,
					     (uint64_t)c * FL_MSGS + m);
	}
	conf_step(s, "%s %d messages on each comm", receiver ? "receiving" : "sending", FL_MSGS);
	t0 = now_s();
	left = FL_COMMS * FL_MSGS;
	while (left) {
		bool progress = false;

		for (int c = 0; c < FL_COMMS; c++)
			for (int m = 0; m < FL_MSGS; m++) {
				void *data = buf[c].p + m * FL_SIZE;
				size_t size = FL_SIZE;
				int tag = 3, done = 0, got;

				if (!req[c][m]) {
					/* in order: a NULL request means "not now" for this
					 * one and all that follow it on this comm */
					if (m && !req[c][m - 1])
						continue;
					r = receiver ? s->api->irecv(s->api, comm[c], 1, &data,
								     &size, &tag, &buf[c].mh,
								     &req[c][m])
						     : s->api->isend(s->api, comm[c], data, size,
								     tag, buf[c].mh, &req[c][m]);
					if (r != ncclSuccess) {
						conf_fail(s, "comm %d: %s #%d returned %s (%d)", c,
							  receiver ? "irecv" : "isend", m,
							  netapi_result_str(r), r);
						goto out;
					}
					if (!req[c][m])
						continue;
					progress = true;
				}
				if (req[c][m] == (void *)1)
					continue; /* done */
				r = s->api->test(s->api, req[c][m], &done, &got);
				if (r != ncclSuccess) {
					conf_fail(s, "comm %d: test #%d returned %s (%d)", c, m,
						  netapi_result_str(r), r);
					goto out;
				}
				if (!done)
					continue;
				if (receiver &&
				    (got != FL_SIZE ||
				     pattern_check(data, FL_SIZE, s->seed,
						   (uint64_t)c * FL_MSGS + m) != (size_t)-1)) {
					conf_fail(s,
						  "comm %d message %d: size %d (sent %d); first wrong "
						  "byte %zd",
						  c, m, got, FL_SIZE,
						  (ssize_t)pattern_check(data, FL_SIZE, s->seed,
									 (uint64_t)c * FL_MSGS +
										 m));
					goto out;
				}
				req[c][m] = (void *)1;
				left--;
				progress = true;
			}
		if (!progress && now_s() - t0 > CONF_XFER_TIMEOUT_S) {
			conf_fail(s, "%d messages not done", left);
			goto out;
		}
		if (!progress)
			idle_wait();
	}
	if (receiver) {
		conf_step(s, "iflush of all %d receives before testing any", FL_COMMS * FL_MSGS);
		if (flush_every_receive(s, comm, buf, freq, &nflush))
			goto out;
		t0 = now_s();
		for (int c = 0; c < FL_COMMS; c++)
			for (int m = 0; m < FL_MSGS; m++) {
				int done = 0, got;

				while (freq[c][m] && !done) {
					r = s->api->test(s->api, freq[c][m], &done, &got);
					if (r != ncclSuccess ||
					    now_s() - t0 > CONF_XFER_TIMEOUT_S) {
						conf_fail(s,
							  "test(flush, comm %d #%d) returned %s (%d)",
							  c, m, netapi_result_str(r), r);
						goto out;
					}
					if (!done)
						idle_wait();
				}
			}
		conf_log(s, "%d iflush calls on %d comms at once: %d flush requests, all done",
			 FL_COMMS * FL_MSGS, FL_COMMS, nflush);
		if (flush_promised() && nflush != FL_COMMS * FL_MSGS) {
			conf_fail(s, "%s=always, yet %d of %d iflush calls returned no request",
				  flush_knob(), FL_COMMS * FL_MSGS - nflush, FL_COMMS * FL_MSGS);
			goto out;
		}
	}
	ret = rdv_sync(s, "fl-done");
	if (!ret && receiver) {
		/* as ncclCommAbort: deregMr, then close, with flushes still in flight */
		conf_step(s, "iflush of every receive again, then deregMr and close untested");
		nflush = 0;
		ret = flush_every_receive(s, comm, buf, freq, &nflush);
	}
out:
	for (int c = 0; c < FL_COMMS; c++) {
		if (buf[c].p)
			cbuf_put(s, comm[c], &buf[c]);
		if (close_comms(s, receiver ? NULL : comm[c], receiver ? comm[c] : NULL, lc[c]))
			ret = -1;
	}
	conf_step(s, "finalize");
	r = s->api->finalize(s->api, s->ctx);
	if (r != ncclSuccess)
		ret = conf_fail(s, "finalize returned %s (%d)", netapi_result_str(r), r);
	return ret;
}
