// SPDX-License-Identifier: Apache-2.0
/*
 * Randomized soak (issue 13): several comms at once, each driven by its own thread (half
 * a to b, half b to a), carrying random traffic: sizes 0 to 16 MiB (log-uniform, one in
 * ten empty), random tags, grouped receives of 1 to maxRecvs buffers sent in shuffled
 * order, receive buffers exact or larger, and a random share of completed receives
 * flushed. Every byte is verified, and the bytes past each message too (xfer.c).
 *
 * CONF_SOAK_TRANSFERS: messages in all (default 2,000), split over CONF_SOAK_COMMS comms
 * (default 4). The seed is logged; CONF_SOAK_SEED=N on both sides replays a run exactly.
 * CONF_SOAK_IDLE_MS=N: each comm, once connected on both sides ("soak comm I: connected,
 * idle for N ms"), moves nothing for N ms before its traffic (a fault can come while the
 * comms are idle).
 */
#include "tests/conformance/conf.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/pattern.h"

#define SOAK_TRANSFERS 2000
#define SOAK_COMMS 4
#define SOAK_MAX_COMMS 16
#define SOAK_MAX_SIZE (16u << 20)
#define SOAK_FLUSH_PCT 20
#define SOAK_INFLIGHT (48u << 20) /* receive buffers in flight per comm */

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && atol(v) > 0 ? atol(v) : def;
}

/* The scenario's wall-clock bound, from the transfer count: 1 s per 100 messages
 * (~100 MiB) on top of a minute, so that 10^5 transfers get their time. */
int sc_soak_bound_s(void)
{
	return (int)(60 + env_long("CONF_SOAK_TRANSFERS", SOAK_TRANSFERS) / 100);
}

/* Log-uniform in [0, max] (every order of magnitude its share), one in ten empty. */
static size_t soak_size(uint64_t *st)
{
	uint64_t bits = prng_range(st, 0, 24), hi = 1ULL << bits;

	if (prng_range(st, 0, 9) == 0)
		return 0;
	return (size_t)prng_range(st, hi / 2, hi > SOAK_MAX_SIZE ? SOAK_MAX_SIZE : hi);
}

static void plan_soak(struct xfer_plan *p, uint64_t seed, int nmsgs, int max_recvs)
{
	uint64_t st = seed;
	int ngroups = 0;

	if (max_recvs > XFER_MAX_GROUP)
		max_recvs = XFER_MAX_GROUP;
	memset(p, 0, sizeof(*p));
	p->msgs = calloc(nmsgs ? nmsgs : 1, sizeof(*p->msgs));
	p->groups = calloc(nmsgs ? nmsgs : 1, sizeof(*p->groups));
	if (!p->msgs || !p->groups)
		abort(); /* a few MiB at most: nothing sensible to do without them */
	for (int m = 0; m < nmsgs; ngroups++) {
		struct xfer_group *g = &p->groups[ngroups];
		int n = (int)prng_range(&st, 1, (uint64_t)max_recvs);

		if (n > nmsgs - m)
			n = nmsgs - m;
		g->first = m;
		g->n = n;
		for (int i = 0; i < n; i++, m++) {
			struct xfer_msg *msg = &p->msgs[m];
			int dup;

			do { /* distinct within a group, anything an int holds otherwise */
				msg->tag = (int)prng_range(&st, 0, INT32_MAX);
				dup = 0;
				for (int k = g->first; k < m; k++)
					dup |= p->msgs[k].tag == msg->tag;
			} while (dup);
			msg->id = (uint64_t)m;
			msg->size = soak_size(&st);
			switch (prng_range(&st, 0, 3)) {
			case 0: msg->cap = msg->size + prng_range(&st, 1, 4096); break;
			case 1: msg->cap = msg->size ? 2 * msg->size : 64; break;
			default: msg->cap = msg->size; break;
			}
			g->send_order[i] = i;
		}
		for (int i = n - 1; i > 0; i--) {
			int j = (int)prng_range(&st, 0, (uint64_t)i), t = g->send_order[i];

			g->send_order[i] = g->send_order[j];
			g->send_order[j] = t;
		}
	}
	p->nmsgs = nmsgs;
	p->ngroups = ngroups;
	p->recv_window = NCCL_NET_MAX_REQUESTS;
	p->send_window = NCCL_NET_MAX_REQUESTS * max_recvs;
	p->inflight_bytes = SOAK_INFLIGHT;
	p->flush_pct = SOAK_FLUSH_PCT;
}

struct soak_comm {
	struct side s; /* a copy: each thread names its own step */
	int index;
	int nmsgs;
	long idle_ms;
	bool receiver;
	uint64_t seed;
	/* results */
	int rc;
	size_t bytes;
	int msgs, flushes;
};

static void *soak_thread(void *argp)
{
	struct soak_comm *c = argp;
	struct side *s = &c->s;
	void *lc = NULL, *rc = NULL, *sc = NULL;
	struct xfer_plan p;
	struct xfer x;
	char name[32];

	memset(&x, 0, sizeof(x));
	snprintf(name, sizeof(name), "soak%d", c->index);
	s->seed = c->seed; /* the pattern's seed: the same on both sides */
	plan_soak(&p, c->seed, c->nmsgs, s->props.max_recvs);
	c->rc = -1;
	if (c->receiver ? link_accept(s, s->ctx, name, &lc, &rc)
			: link_connect(s, s->ctx, name, &sc))
		goto out;
	if (c->idle_ms) {
		snprintf(name, sizeof(name), "soak%d-idle", c->index);
		if (rdv_sync(s, name))
			goto out;
		conf_log(s, "soak comm %d: connected, idle for %ld ms", c->index, c->idle_ms);
		usleep((useconds_t)(c->idle_ms * 1000));
	}
	c->rc = xfer_run(&x, s, c->receiver ? rc : sc, &p, !c->receiver) ? -1 : 0;
	c->bytes = x.bytes_done;
	c->msgs = x.msgs_done;
	c->flushes = x.flushes;
	if (!c->rc) {
		snprintf(name, sizeof(name), "soak%d-done", c->index);
		c->rc = rdv_sync(s, name);
	}
	xfer_dereg(&x);
out:
	if (close_comms(s, sc, rc, lc))
		c->rc = -1;
	xfer_free(&x);
	plan_free(&p);
	return NULL;
}

int sc_soak(struct side *s)
{
	long transfers = env_long("CONF_SOAK_TRANSFERS", SOAK_TRANSFERS);
	int ncomms = (int)env_long("CONF_SOAK_COMMS", SOAK_COMMS), started = 0, rc = 0;
	const char *replay = getenv("CONF_SOAK_SEED");
	uint64_t seed = replay ? strtoull(replay, NULL, 0) : s->seed;
	struct soak_comm c[SOAK_MAX_COMMS];
	pthread_t th[SOAK_MAX_COMMS];
	size_t bytes = 0;
	int msgs = 0, flushes = 0;
	double t0 = now_s();

	if (ncomms > SOAK_MAX_COMMS)
		ncomms = SOAK_MAX_COMMS;
	alarm((unsigned)sc_soak_bound_s());
	conf_log(s,
		 "soak seed %" PRIu64 " (replay: CONF_SOAK_SEED=%" PRIu64
		 "), %ld transfers over %d comms, maxRecvs %d",
		 seed, seed, transfers, ncomms, s->props.max_recvs);
	for (int i = 0; i < ncomms; i++) {
		c[i].s = *s;
		c[i].index = i;
		c[i].nmsgs = (int)(transfers / ncomms + (i < transfers % ncomms));
		/* even comms a receives, odd ones b does */
		c[i].receiver = (i % 2 == 0) == (s->role == 'a');
		c[i].seed = seed * 1000003ULL + (uint64_t)i;
		c[i].rc = -1;
		c[i].idle_ms = getenv("CONF_SOAK_IDLE_MS") ? env_long("CONF_SOAK_IDLE_MS", 0) : 0;
		c[i].bytes = 0;
		c[i].msgs = c[i].flushes = 0;
	}
	for (; started < ncomms; started++)
		if (pthread_create(&th[started], NULL, soak_thread, &c[started])) {
			rc = conf_fail(s, "pthread_create");
			break;
		}
	for (int i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		rc |= c[i].rc;
		if (c[i].receiver) {
			bytes += c[i].bytes;
			msgs += c[i].msgs;
			flushes += c[i].flushes;
		}
	}
	conf_log(s,
		 "soak %s: received and verified %d messages, %zu bytes (%.1f GiB), %d iflush, "
		 "in %.1f s; seed %" PRIu64,
		 rc ? "FAILED" : "done", msgs, bytes, bytes / 1073741824.0, flushes, now_s() - t0,
		 seed);
	return rc ? -1 : 0;
}
