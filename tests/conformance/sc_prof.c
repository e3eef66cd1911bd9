// SPDX-License-Identifier: Apache-2.0
/*
 * profiler: a stand-in for NCCL's profiler. v10 to v12 pass init a callback; the plugin's
 * events must pair up (every Start exactly one Stop), hang under the phandles isend and
 * irecv were given, and add up, per request, to the bytes of its message. Then init
 * without a callback: not one call more.
 *
 * The callback records from any thread (NCCL calls it from several), under a mutex.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/conformance/conf.h"
#include "tools/pattern.h"

#define PROF_MSGS 4
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

/* One init (with cb or none), one comm, the messages with phandles ph[i]. */
static int prof_round(struct side *s, ncclProfilerCallback_t cb, void **ph, const char *name)
{
	struct net_api api = *s->api;
	struct side s2 = *s;
	void *ctx = NULL, *lc = NULL, *comm = NULL, *mh = NULL;
	char *buf = malloc(prof_size[2]);
	int rc = -1;

	api.prof = cb;
	s2.api = &api;
	if (!buf)
		return conf_fail(s, "out of memory");
	conf_step(s, "init (%s callback)", cb ? "a" : "no");
	if (check(s, api.init(&api, &ctx, s->seed), "init"))
		goto out;
	if (s->role == 'a' ? link_accept(&s2, ctx, name, &lc, &comm)
			   : link_connect(&s2, ctx, name, &comm))
		goto fin;
	if (check(s, api.reg_mr(&api, comm, buf, prof_size[2], &mh), "regMr"))
		goto close;
	rc = 0;
	for (int i = 0; i < PROF_MSGS && !rc; i++)
		rc = prof_xfer(&s2, comm, buf, mh, i, &ph[i]);
	if (check(s, api.dereg_mr(&api, comm, mh), "deregMr"))
		rc = -1;
close:
	if (close_comms(&s2, s->role == 'b' ? comm : NULL, s->role == 'a' ? comm : NULL, lc))
		rc = -1;
fin:
	if (check(s, api.finalize(&api, ctx), "finalize"))
		rc = -1;
out:
	free(buf);
	return rc;
}

/* The events of the round with callback: paired, parented, adding up. */
static int prof_verify(struct side *s, void **ph)
{
	size_t sum[PROF_MSGS] = { 0 };
	int nev[PROF_MSGS] = { 0 }, devs[PROF_MSGS] = { 0 }, qps[PROF_MSGS] = { 0 };

	if (!prof_nev)
		return conf_fail(s, "no profiler event at all (%ld callback calls)", prof_calls);
	if (prof_nev >= PROF_MAX_EVENTS)
		return conf_fail(s, "more than %d events", PROF_MAX_EVENTS);
	if (prof_bad_stop)
		return conf_fail(s, "%ld stops of no event or of a stopped one", prof_bad_stop);
	for (int k = 0; k < prof_nev; k++) {
		const struct prof_event *e = &prof_ev[k];
		int i = 0;

		while (i < PROF_MSGS && e->parent != ph[i])
			i++;
		if (i == PROF_MSGS)
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
	for (int i = 0; i < PROF_MSGS; i++) {
		conf_log(s,
			 "message %d (%zu bytes): %d events, %d devices, %d QPs or ops, %zu bytes",
			 i, prof_size[i], nev[i], devs[i], qps[i], sum[i]);
		if (sum[i] != prof_size[i])
			return conf_fail(s,
					 "message %d: its events' lengths add up to %zu, want %zu",
					 i, sum[i], prof_size[i]);
	}
	return 0;
}

int sc_profiler(struct side *s)
{
	/* distinct phandles, as NCCL's are (&sub->pHandles[step]): never dereferenced here */
	static char parents[2][PROF_MSGS];
	void *ph[PROF_MSGS], *ph2[PROF_MSGS];
	long calls;

	for (int i = 0; i < PROF_MSGS; i++) {
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
