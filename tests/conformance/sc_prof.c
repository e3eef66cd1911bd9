// SPDX-License-Identifier: Apache-2.0
/*
 * profiler: a stand-in for NCCL's profiler. v10 to v12 pass init a callback; the plugin's
 * events must pair up (every Start exactly one Stop), hang under the phandles isend and
 * irecv were given, and add up, per request, to the bytes of its message. Then init
 * without a callback: not one call more.
 *
 * Two comms, each driven from its own thread at once, as NCCL's proxy threads do: the
 * callback records from any thread, under a mutex (net_ofi calls it from whichever thread
 * reaps a completion). tests/tsan runs it under ThreadSanitizer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/conformance/conf.h"
#include "tools/pattern.h"

#define PROF_MSGS 4
#define PROF_COMMS 2
#define PROF_PH (PROF_COMMS * PROF_MSGS) /* phandles of a round: comm c, message i */
#define PROF_MAX_EVENTS 4096
/* NCCL's src/include/plugin/nccl_profiler.h, net_ib_v1.h, net_socket_v1.h */
#define PROF_TYPE_IB (1LL << 16)
#define PROF_TYPE_SOCK (2LL << 16)

/* 8 B, 1 MiB, one that stripes over a fused device's NICs and a NIC's QPs, and an odd one */
static const size_t prof_size[PROF_MSGS] = { 8, 1 << 20, (5 << 20) + 3, 300001 };

struct prof_ib_descr { /* ncclProfilerNetIbDescr_v1_t */
	uint8_t type;
	union {
		struct {
			int device;
			uint64_t wr_id;
			int opcode;
			int qpNum;
			size_t length;
		} qp;
	};
};

struct prof_sock_descr { /* ncclProfilerNetSockDescr_v1_t */
	uint8_t type;
	union {
		struct {
			int fd;
			int op;
			size_t length;
		} sock;
	};
};

struct prof_event {
	void *parent;
	int64_t plugin_id;
	uint8_t type; /* the descriptor's */
	int device, qpn;
	size_t length;
	int stops;
};

static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static struct prof_event prof_ev[PROF_MAX_EVENTS];
static int prof_nev;
static long prof_calls;    /* every call, with or without a callback given at init */
static long prof_bad_stop; /* stops of no event, or of one stopped before */

static ncclResult_t prof_cb(void **eh, int type, void *parent, int64_t plugin_id, void *data)
{
	ncclResult_t rc = ncclSuccess;

	pthread_mutex_lock(&prof_lock);
	prof_calls++;
	if (type == 0) {
		struct prof_event *e = prof_nev < PROF_MAX_EVENTS ? &prof_ev[prof_nev++] : NULL;

		if (!e) {
			rc = ncclInternalError;
		} else {
			memset(e, 0, sizeof(*e));
			e->parent = parent;
			e->plugin_id = plugin_id;
			if ((plugin_id & ~0xffffLL) == PROF_TYPE_IB) {
				const struct prof_ib_descr *d = data;

				e->type = d->type;
				e->device = d->qp.device;
				e->qpn = d->qp.qpNum;
				e->length = d->qp.length;
			} else if ((plugin_id & ~0xffffLL) == PROF_TYPE_SOCK) {
				const struct prof_sock_descr *d = data;

				e->type = d->type;
				e->device = d->sock.fd;
				e->qpn = d->sock.op;
				e->length = d->sock.length;
			}
			*eh = e;
		}
	} else if (type == 1) {
		struct prof_event *e = *eh;

		if (!e || e < prof_ev || e >= prof_ev + prof_nev || e->stops++)
			prof_bad_stop++;
	} else {
		rc = ncclInvalidArgument;
	}
	pthread_mutex_unlock(&prof_lock);
	return rc;
}

static int check(struct side *s, ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return 0;
	return conf_fail(s, "%s returned %s (%d)", what, netapi_result_str(r), r);
}

/* Message i both ways of one comm: a receives, b sends; every byte checked. */
static int prof_xfer(struct side *s, void *comm, char *buf, void *mh, int i, void **ph)
{
	size_t size = prof_size[i];
	double until = now_s() + CONF_XFER_TIMEOUT_S;
	void *req = NULL, *data = buf;
	int tag = 7, done = 0, got = 0;
	struct net_api api = *s->api;
	size_t bad;

	api.phandles = ph;
	conf_step(s, "%s of %zu bytes, phandle %p", s->role == 'a' ? "irecv" : "isend", size,
		  ph ? ph[0] : NULL);
	if (s->role == 'a') {
		memset(buf, 0, size);
		if (check(s, api.irecv(&api, comm, 1, &data, &size, &tag, &mh, &req), "irecv"))
			return -1;
	} else {
		pattern_fill(buf, size, s->seed, (uint64_t)i);
		do {
			if (check(s, api.isend(&api, comm, buf, size, tag, mh, &req), "isend"))
				return -1;
			if (!req)
				idle_wait();
		} while (!req && now_s() < until);
	}
	if (!req)
		return conf_fail(s, "no request within %.0f s", CONF_XFER_TIMEOUT_S);
	while (!done && now_s() < until)
		if (check(s, api.test(&api, req, &done, &got), "test"))
			return -1;
	if (!done)
		return conf_fail(s, "not done within %.0f s", CONF_XFER_TIMEOUT_S);
	if ((size_t)got != size)
		return conf_fail(s, "test() reported %d bytes, want %zu", got, size);
	if (s->role == 'a' && (bad = pattern_check(buf, size, s->seed, (uint64_t)i)) != SIZE_MAX)
		return conf_fail(s, "message %d: byte %zu differs", i, bad);
	return 0;
}

struct prof_thread {
	struct side s;
	void *comm;
	char *buf;
	void *mh;
	void **ph; /* PROF_MSGS of them */
	int rc;
};

static void *prof_thread_main(void *arg)
{
	struct prof_thread *t = arg;

	for (int i = 0; i < PROF_MSGS && !t->rc; i++)
		t->rc = prof_xfer(&t->s, t->comm, t->buf, t->mh, i, &t->ph[i]);
	return NULL;
}

/* One init (with cb or none), PROF_COMMS comms, each driven from its own thread: the
 * messages of comm c with phandles ph[c * PROF_MSGS + i]. */
static int prof_round(struct side *s, ncclProfilerCallback_t cb, void **ph, const char *name)
{
	struct net_api api = *s->api;
	struct side s2 = *s;
	struct prof_thread t[PROF_COMMS];
	pthread_t tid[PROF_COMMS];
	void *ctx = NULL, *lc[PROF_COMMS] = { 0 };
	int rc = -1, nt = 0;
	char key[64];

	memset(t, 0, sizeof(t));
	api.prof = cb;
	s2.api = &api;
	conf_step(s, "init (%s callback)", cb ? "a" : "no");
	if (check(s, api.init(&api, &ctx, s->seed), "init"))
		return -1;
	for (int c = 0; c < PROF_COMMS; c++) {
		snprintf(key, sizeof(key), "%s.%d", name, c);
		if (s->role == 'a' ? link_accept(&s2, ctx, key, &lc[c], &t[c].comm)
				   : link_connect(&s2, ctx, key, &t[c].comm))
			goto close;
		t[c].buf = malloc(prof_size[2]);
		if (!t[c].buf) {
			conf_fail(s, "out of memory");
			goto close;
		}
		if (check(s, api.reg_mr(&api, t[c].comm, t[c].buf, prof_size[2], &t[c].mh),
			  "regMr"))
			goto close;
		t[c].s = s2;
		t[c].ph = &ph[c * PROF_MSGS];
	}
	for (nt = 0; nt < PROF_COMMS; nt++)
		if (pthread_create(&tid[nt], NULL, prof_thread_main, &t[nt])) {
			conf_fail(s, "pthread_create failed");
			break;
		}
	rc = nt == PROF_COMMS ? 0 : -1;
	for (int c = 0; c < nt; c++) {
		pthread_join(tid[c], NULL);
		if (t[c].rc)
			rc = -1;
	}
close:
	for (int c = 0; c < PROF_COMMS; c++) {
		if (t[c].mh && check(s, api.dereg_mr(&api, t[c].comm, t[c].mh), "deregMr"))
			rc = -1;
		if ((t[c].comm || lc[c]) && close_comms(&s2, s->role == 'b' ? t[c].comm : NULL,
							s->role == 'a' ? t[c].comm : NULL, lc[c]))
			rc = -1;
		free(t[c].buf);
	}
	if (check(s, api.finalize(&api, ctx), "finalize"))
		rc = -1;
	return rc;
}

/* The events of the round with callback: paired, parented, adding up. */
static int prof_verify(struct side *s, void **ph)
{
	size_t sum[PROF_PH] = { 0 };
	int nev[PROF_PH] = { 0 }, devs[PROF_PH] = { 0 }, qps[PROF_PH] = { 0 };

	if (!prof_nev)
		return conf_fail(s, "no profiler event at all (%ld callback calls)", prof_calls);
	if (prof_nev >= PROF_MAX_EVENTS)
		return conf_fail(s, "more than %d events", PROF_MAX_EVENTS);
	if (prof_bad_stop)
		return conf_fail(s, "%ld stops of no event or of a stopped one", prof_bad_stop);
	for (int k = 0; k < prof_nev; k++) {
		const struct prof_event *e = &prof_ev[k];
		int i = 0;

		while (i < PROF_PH && e->parent != ph[i])
			i++;
		if (i == PROF_PH)
			return conf_fail(s, "event %d: parent %p is none of the phandles given", k,
					 e->parent);
		if (e->stops != 1)
			return conf_fail(s, "event %d (message %d): %d stops, want 1", k, i,
					 e->stops);
		if (e->plugin_id != (PROF_TYPE_IB | 1) && e->plugin_id != (PROF_TYPE_SOCK | 1))
			return conf_fail(s, "event %d: plugin id %#llx is no NCCL type/version", k,
					 (unsigned long long)e->plugin_id);
		if (e->type != 1)
			return conf_fail(s,
					 "event %d: descriptor type %u, want 1 (ncclProfileQp, "
					 "ncclProfileSocket)",
					 k, e->type);
		for (int j = 0; j < k; j++)
			if (prof_ev[j].parent == e->parent && prof_ev[j].device == e->device)
				goto seen_dev;
		devs[i]++;
seen_dev:
		for (int j = 0; j < k; j++)
			if (prof_ev[j].parent == e->parent && prof_ev[j].qpn == e->qpn &&
			    prof_ev[j].device == e->device)
				goto seen_qp;
		qps[i]++;
seen_qp:
		sum[i] += e->length;
		nev[i]++;
	}
	for (int i = 0; i < PROF_PH; i++) {
		size_t want = prof_size[i % PROF_MSGS];

		conf_log(s,
			 "comm %d message %d (%zu bytes): %d events, %d devices, %d QPs or ops, %zu bytes",
			 i / PROF_MSGS, i % PROF_MSGS, want, nev[i], devs[i], qps[i], sum[i]);
		if (sum[i] != want)
			return conf_fail(
				s,
				"comm %d message %d: its events' lengths add up to %zu, want %zu",
				i / PROF_MSGS, i % PROF_MSGS, sum[i], want);
	}
	return 0;
}

int sc_profiler(struct side *s)
{
	/* distinct phandles, as NCCL's are (&sub->pHandles[step]): never dereferenced here */
	static char parents[2][PROF_PH];
	void *ph[PROF_PH], *ph2[PROF_PH];
	long calls;

	/* braid's default emits events only when NCCL_PROFILER_PLUGIN names a profiler (each
	 * event costs the data path): this scenario asks for them, unless its caller chose */
	setenv("BRAID_PROFILER", "1", 0);
	for (int i = 0; i < PROF_PH; i++) {
		ph[i] = &parents[0][i];
		ph2[i] = &parents[1][i];
	}
	if (prof_round(s, prof_cb, ph, "prof.on"))
		return -1;
	pthread_mutex_lock(&prof_lock);
	if (prof_verify(s, ph)) {
		pthread_mutex_unlock(&prof_lock);
		return -1;
	}
	calls = prof_calls;
	pthread_mutex_unlock(&prof_lock);
	/* no callback: the phandles still come, nothing may be emitted */
	if (prof_round(s, NULL, ph2, "prof.off"))
		return -1;
	pthread_mutex_lock(&prof_lock);
	if (prof_calls != calls) {
		pthread_mutex_unlock(&prof_lock);
		return conf_fail(s, "init without a callback, yet %ld calls came",
				 prof_calls - calls);
	}
	pthread_mutex_unlock(&prof_lock);
	conf_log(s, "%d events, every one stopped once; none without a callback", prof_nev);
	return 0;
}
