// SPDX-License-Identifier: Apache-2.0
/*
 * ipm: the client that tests/bench/ipm.sh runs under callgrind to count instructions per
 * message. One process holds both ends of one connection on one device (listen, connect
 * and accept polled in turn, as NCCL's proxy thread does for its peers) and streams
 * messages of one size through the plugin's exported ncclNet API (tools/netapi.c), so
 * that nothing but the plugin's public contract is relied on:
 *
 *   - up to --window receives posted (one irecv of one buffer each);
 *   - the send of message i is posted only once its receive is posted;
 *   - the oldest send and the oldest receive are tested; a received buffer is compared,
 *     every byte, with the buffer it was sent from, and its first and last 8 bytes carry
 *     the message number.
 *
 * Every call that finds nothing to do is counted: test() that answers not-done, and
 * isend()/irecv() that answer a NULL request. The idle cost of one such call is then
 * measured in the same process on a quiet connection (--idle calls each): test() on a
 * receive nothing is sent to, and isend() with no receive posted.
 *
 * Under callgrind the phases are dumped apart (client requests, no-ops otherwise):
 *   "stream"      from the end of set-up (comms and registrations made) to the last
 *                 message verified: --warmup + --msgs messages
 *   "calib-prep"  the calibration's own set-up and clean-up (ignored)
 *   "idle-rtest"  --idle test() calls on a receive that nothing is sent to
 *   "idle-isend"  --idle isend() calls answered NULL (absent when the first one is taken)
 *   end of run    close, deregister, finalize, exit
 * The last line on stdout gives the counts ipm.sh needs ("ipm: ...").
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
/* Without valgrind's headers the client still runs; ipm.sh then finds no phases and
 * says to install valgrind (make deps) and rebuild. */
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_DUMP_STATS_AT(name)
#endif

#include "tools/netapi.h"

#define IPM_MAX_WINDOW 32
#define IPM_TAG 7

struct ipm_opts {
	const char *plugin;
	int api;
	int dev;
	size_t size;
	long msgs;
	long warmup;
	int window;
	long idle;
	double timeout_s;
	int profiler; /* v10+: pass init a profiler callback (ipm_prof); 2: calls not required */
};

struct ipm_idle {
	long rtest;      /* test() of a receive: not done */
	long stest;      /* test() of a send: not done */
	long null_isend; /* isend() answered NULL */
	long null_irecv; /* irecv() answered NULL */
};

struct ipm {
	struct ipm_opts o;
	struct net_api api;
	void *ctx, *lc, *sc, *rc;
	char *sbuf[IPM_MAX_WINDOW], *rbuf[IPM_MAX_WINDOW];
	void *smh[IPM_MAX_WINDOW], *rmh[IPM_MAX_WINDOW];
	void *sreq[IPM_MAX_WINDOW], *rreq[IPM_MAX_WINDOW];
	struct ipm_idle idle;
	double deadline;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ipm: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

static int call_fail(const char *what, ncclResult_t r)
{
	char warn[256];

	netapi_last_warn(warn, sizeof(warn));
	return fail("%s returned %s (%d)%s%s", what, netapi_result_str(r), r, warn[0] ? ": " : "",
		    warn);
}

/* Consecutive rounds of a polling loop that made no progress. */
struct idle_wait {
	unsigned int streak;
};

/*
 * A round that made no progress gives the core away: the provider's or the emulator's
 * threads may be the ones with work (under valgrind only one thread runs at a time).
 * The sleep doubles from 0.2 ms to 3.2 ms while nothing moves, so that a stretch when
 * the machine is busy elsewhere costs a few idle calls, not hundreds.
 */
static int idle_round(struct ipm *b, struct idle_wait *w)
{
	struct timespec ts = { 0, 200000L << (w->streak < 4 ? w->streak : 4) };

	w->streak++;
	nanosleep(&ts, NULL);
	if (now_s() > b->deadline)
		return fail("no progress within the run's %.0f s bound", b->o.timeout_s);
	return 0;
}

/* The message number in the first and last 8 bytes (both the same word for 8 bytes). */
static void stamp(char *buf, size_t size, uint64_t id)
{
	memcpy(buf, &id, sizeof(id));
	if (size >= 2 * sizeof(id))
		memcpy(buf + size - sizeof(id), &id, sizeof(id));
}

static int verify(const struct ipm *b, int slot, uint64_t id, int got)
{
	uint64_t head;

	if ((size_t)got != b->o.size)
		return fail("message %llu: test() reported %d bytes, %zu were sent",
			    (unsigned long long)id, got, b->o.size);
	memcpy(&head, b->rbuf[slot], sizeof(head));
	if (head != id)
		return fail("message %llu: receive buffer holds message %llu",
			    (unsigned long long)id, (unsigned long long)head);
	if (memcmp(b->rbuf[slot], b->sbuf[slot], b->o.size))
		return fail("message %llu: received bytes differ from the bytes sent",
			    (unsigned long long)id);
	return 0;
}

static ncclResult_t post_recv(struct ipm *b, int slot, void **req)
{
	size_t size = b->o.size;
	int tag = IPM_TAG;
	void *data = b->rbuf[slot];

	return b->api.irecv(&b->api, b->rc, 1, &data, &size, &tag, &b->rmh[slot], req);
}

static ncclResult_t post_send(struct ipm *b, int slot, void **req)
{
	return b->api.isend(&b->api, b->sc, b->sbuf[slot], b->o.size, IPM_TAG, b->smh[slot], req);
}

/* Messages [first, first + n): the stream described at the top of the file. */
static int stream(struct ipm *b, uint64_t first, long n)
{
	long rposted = 0, rdone = 0, sposted = 0, sdone = 0;
	struct idle_wait wait = { 0 };
	const int w = b->o.window;
	ncclResult_t r;
	int done, got;

	while (rdone < n) {
		bool progress = false;

		if (rposted < n && rposted - rdone < w) {
			int slot = (int)(rposted % w);

			r = post_recv(b, slot, &b->rreq[slot]);
			if (r != ncclSuccess)
				return call_fail("irecv", r);
			if (b->rreq[slot]) {
				rposted++;
				progress = true;
			} else {
				b->idle.null_irecv++;
			}
		}
		if (sposted < rposted && sposted - sdone < w) {
			int slot = (int)(sposted % w);

			stamp(b->sbuf[slot], b->o.size, first + sposted);
			r = post_send(b, slot, &b->sreq[slot]);
			if (r != ncclSuccess)
				return call_fail("isend", r);
			if (b->sreq[slot]) {
				sposted++;
				progress = true;
			} else {
				b->idle.null_isend++;
			}
		}
		if (sdone < sposted) {
			int slot = (int)(sdone % w);

			r = b->api.test(&b->api, b->sreq[slot], &done, &got);
			if (r != ncclSuccess)
				return call_fail("test(send)", r);
			if (done) {
				sdone++;
				progress = true;
			} else {
				b->idle.stest++;
			}
		}
		if (rdone < rposted) {
			int slot = (int)(rdone % w);

			r = b->api.test(&b->api, b->rreq[slot], &done, &got);
			if (r != ncclSuccess)
				return call_fail("test(recv)", r);
			if (done) {
				if (verify(b, slot, first + rdone, got))
					return -1;
				rdone++;
				progress = true;
			} else {
				b->idle.rtest++;
			}
		}
		if (progress)
			wait.streak = 0;
		else if (idle_round(b, &wait))
			return -1;
	}
	while (sdone < sposted) { /* all received: the sends end too */
		int slot = (int)(sdone % w);

		r = b->api.test(&b->api, b->sreq[slot], &done, &got);
		if (r != ncclSuccess)
			return call_fail("test(send)", r);
		if (done) {
			sdone++;
			wait.streak = 0;
		} else if (b->idle.stest++, idle_round(b, &wait)) {
			return -1;
		}
	}
	return 0;
}

/* Test a request until done (set-up and clean-up only: never counted). */
static int wait_done(struct ipm *b, void *req, const char *what)
{
	struct idle_wait wait = { 0 };
	ncclResult_t r;
	int done = 0, got;

	for (;;) {
		r = b->api.test(&b->api, req, &done, &got);
		if (r != ncclSuccess)
			return call_fail(what, r);
		if (done)
			return 0;
		if (idle_round(b, &wait))
			return -1;
	}
}

/*
 * The cost of an idle call, on a quiet connection: test() of a posted receive nothing is
 * sent to, then isend() with no receive posted. The first 16 of each run before the
 * measured ones, so that one-time work (a receive's announcement going out) is not
 * counted as idle. *isend_calls is 0 when the first isend() is taken at once (a plugin
 * that sends small messages eagerly has no NULL answer to measure).
 */
static int calibrate(struct ipm *b, uint64_t id, long *isend_calls)
{
	void *rreq = NULL, *sreq = NULL;
	struct idle_wait wait = { 0 };
	ncclResult_t r;
	int done, got;
	long i;

	*isend_calls = 0;
	r = post_recv(b, 0, &rreq);
	while (r == ncclSuccess && !rreq && !idle_round(b, &wait))
		r = post_recv(b, 0, &rreq);
	if (r != ncclSuccess || !rreq)
		return r != ncclSuccess ? call_fail("irecv (calibration)", r) : -1;
	for (i = 0; i < 16; i++)
		if ((r = b->api.test(&b->api, rreq, &done, &got)) != ncclSuccess)
			return call_fail("test (calibration)", r);
	CALLGRIND_DUMP_STATS_AT("calib-prep");
	for (i = 0; i < b->o.idle; i++) {
		r = b->api.test(&b->api, rreq, &done, &got);
		if (r != ncclSuccess)
			return call_fail("test (calibration)", r);
		if (done)
			return fail("a receive completed with nothing sent to it");
	}
	CALLGRIND_DUMP_STATS_AT("idle-rtest");
	stamp(b->sbuf[0], b->o.size, id);
	do {
		r = post_send(b, 0, &sreq);
	} while (r == ncclSuccess && !sreq && !idle_round(b, &wait));
	if (r != ncclSuccess || !sreq)
		return r != ncclSuccess ? call_fail("isend (calibration)", r) : -1;
	if (wait_done(b, rreq, "test(recv)") || wait_done(b, sreq, "test(send)"))
		return -1;
	if (verify(b, 0, id, (int)b->o.size))
		return -1;

	/* isend() with no receive posted */
	stamp(b->sbuf[0], b->o.size, id + 1);
	sreq = NULL;
	for (i = 0; i < 16 && !sreq; i++)
		if ((r = post_send(b, 0, &sreq)) != ncclSuccess)
			return call_fail("isend (calibration)", r);
	if (!sreq) {
		CALLGRIND_DUMP_STATS_AT("calib-prep");
		for (i = 0; i < b->o.idle && !sreq; i++)
			if ((r = post_send(b, 0, &sreq)) != ncclSuccess)
				return call_fail("isend (calibration)", r);
		if (sreq)
			return fail("isend() took a send after %ld NULL answers with no receive "
				    "posted: the calibration cannot tell idle calls apart",
				    i);
		*isend_calls = i;
		CALLGRIND_DUMP_STATS_AT("idle-isend");
	}
	r = post_recv(b, 0, &rreq);
	while (r == ncclSuccess && !rreq && !idle_round(b, &wait))
		r = post_recv(b, 0, &rreq);
	if (r != ncclSuccess || !rreq)
		return r != ncclSuccess ? call_fail("irecv (calibration)", r) : -1;
	while (!sreq) {
		if ((r = post_send(b, 0, &sreq)) != ncclSuccess)
			return call_fail("isend (calibration)", r);
		if (!sreq && idle_round(b, &wait))
			return -1;
	}
	if (wait_done(b, rreq, "test(recv)") || wait_done(b, sreq, "test(send)"))
		return -1;
	if (verify(b, 0, id + 1, (int)b->o.size))
		return -1;
	CALLGRIND_DUMP_STATS_AT("calib-prep");
	return 0;
}

/* listen, then connect and accept polled in turn until both comms exist (bounded). */
static int link_up(struct ipm *b)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	struct idle_wait wait = { 0 };
	ncclResult_t r;

	r = b->api.listen(&b->api, b->ctx, b->o.dev, handle, &b->lc);
	if (r != ncclSuccess || !b->lc)
		return call_fail("listen", r);
	while (!b->sc || !b->rc) {
		if (!b->sc && (r = b->api.connect(&b->api, b->ctx, b->o.dev, handle, &b->sc)))
			return call_fail("connect", r);
		if (!b->rc && (r = b->api.accept(&b->api, b->lc, &b->rc)))
			return call_fail("accept", r);
		if ((!b->sc || !b->rc) && idle_round(b, &wait))
			return -1;
	}
	return 0;
}

static int buffers(struct ipm *b)
{
	size_t len = (b->o.size + 4095) & ~(size_t)4095;
	ncclResult_t r;

	for (int i = 0; i < b->o.window; i++) {
		b->sbuf[i] = aligned_alloc(4096, len);
		b->rbuf[i] = aligned_alloc(4096, len);
		if (!b->sbuf[i] || !b->rbuf[i])
			return fail("out of memory for %d buffers of %zu bytes", 2 * b->o.window,
				    len);
		/* every byte differs from its neighbours and from the other slots */
		for (size_t k = 0; k < len; k++)
			b->sbuf[i][k] = (char)(k * 131 + i * 17 + (k >> 8));
		memset(b->rbuf[i], 0xa5, len);
		r = b->api.reg_mr(&b->api, b->sc, b->sbuf[i], b->o.size, &b->smh[i]);
		if (r != ncclSuccess)
			return call_fail("regMr (send)", r);
		r = b->api.reg_mr(&b->api, b->rc, b->rbuf[i], b->o.size, &b->rmh[i]);
		if (r != ncclSuccess)
			return call_fail("regMr (recv)", r);
	}
	return 0;
}

static int teardown(struct ipm *b)
{
	ncclResult_t r;
	int rc = 0;

	for (int i = 0; i < b->o.window; i++) {
		if (b->smh[i] && (r = b->api.dereg_mr(&b->api, b->sc, b->smh[i])))
			rc = call_fail("deregMr (send)", r);
		if (b->rmh[i] && (r = b->api.dereg_mr(&b->api, b->rc, b->rmh[i])))
			rc = call_fail("deregMr (recv)", r);
	}
	if (b->sc && (r = b->api.close_send(&b->api, b->sc)))
		rc = call_fail("closeSend", r);
	if (b->rc && (r = b->api.close_recv(&b->api, b->rc)))
		rc = call_fail("closeRecv", r);
	if (b->lc && (r = b->api.close_listen(&b->api, b->lc)))
		rc = call_fail("closeListen", r);
	if ((r = b->api.finalize(&b->api, b->ctx)))
		rc = call_fail("finalize", r);
	for (int i = 0; i < b->o.window; i++) {
		free(b->sbuf[i]);
		free(b->rbuf[i]);
	}
	return rc;
}

/*
 * --profiler 1 (or 2, which does not require the plugin to call it): the callback init
 * gets. It does what NCCL's does when its profiler wants no
 * event of this kind (src/plugin/profiler.cc: nothing but its checks), so what callgrind
 * counts in the plugin is what emitting costs braid; its own instructions are the
 * client's, which no column counts. NCCL passes phandles whether or not a profiler is
 * there: so does ipm from v10 on.
 */
static long ipm_prof_calls;
static ncclResult_t ipm_prof(void **eh, int type, void *parent, int64_t plugin_id, void *data)
{
	(void)eh, (void)type, (void)parent, (void)plugin_id, (void)data;
	ipm_prof_calls++;
	return ncclSuccess;
}

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s --plugin PATH --size BYTES --msgs N [--warmup N] [--window N]\n"
		"          [--idle N] [--api 8..12] [--dev N] [--timeout S] [--profiler 0|1|2]\n"
		"Streams N messages of BYTES through one connection of the plugin in this\n"
		"process (tests/bench/ipm.sh runs it under callgrind).\n",
		argv0);
	return 2;
}

static int parse(int argc, char **argv, struct ipm_opts *o)
{
	*o = (struct ipm_opts){ .api = 8,
				.warmup = 64,
				.window = 8,
				.idle = 1000,
				.timeout_s = 300,
				.msgs = -1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;

		if (!v)
			return usage(argv[0]);
		i++;
		errno = 0;
		if (!strcmp(a, "--plugin"))
			o->plugin = v;
		else if (!strcmp(a, "--api"))
			o->api = (int)strtol(v, &end, 10);
		else if (!strcmp(a, "--dev"))
			o->dev = (int)strtol(v, &end, 10);
		else if (!strcmp(a, "--size"))
			o->size = strtoull(v, &end, 10);
		else if (!strcmp(a, "--msgs"))
			o->msgs = strtol(v, &end, 10);
		else if (!strcmp(a, "--warmup"))
			o->warmup = strtol(v, &end, 10);
		else if (!strcmp(a, "--window"))
			o->window = (int)strtol(v, &end, 10);
		else if (!strcmp(a, "--idle"))
			o->idle = strtol(v, &end, 10);
		else if (!strcmp(a, "--timeout"))
			o->timeout_s = strtod(v, &end);
		else if (!strcmp(a, "--profiler"))
			o->profiler = (int)strtol(v, &end, 10);
		else
			return usage(argv[0]);
		if (end && (*end || errno))
			return fail("%s: bad value '%s'", a, v), 2;
	}
	if (!o->plugin || o->size < 8 || o->size > INT_MAX || o->msgs < 0 || o->warmup < 0 ||
	    o->window < 1 || o->window > IPM_MAX_WINDOW || o->idle < 1 || o->timeout_s <= 0 ||
	    o->api < NETAPI_MIN_VERSION || o->api > NETAPI_MAX_VERSION ||
	    (o->profiler && o->api < 10))
		return usage(argv[0]);
	return 0;
}

static int run(struct ipm *b)
{
	char loaded[256], err[1024];
	struct net_props props;
	long isend_calls;
	ncclResult_t r;
	void *dl;
	int ndev;

	dl = netapi_open(b->o.plugin, loaded, sizeof(loaded), err, sizeof(err));
	if (!dl)
		return fail("cannot load the plugin: %s", err);
	if (netapi_bind(dl, b->o.api, &b->api))
		return fail("%s has no ncclNetPlugin_v%d", loaded, b->o.api);
	if (b->o.api >= 10) {
		static char parents[1];
		static void *const phandles[1] = { parents };

		b->api.phandles = phandles;
		b->api.prof = b->o.profiler ? ipm_prof : NULL;
	}
	if ((r = b->api.init(&b->api, &b->ctx, 1)))
		return call_fail("init", r);
	if ((r = b->api.devices(&b->api, &ndev)))
		return call_fail("devices", r);
	if (b->o.dev >= ndev)
		return fail("--dev %d: the plugin has %d devices", b->o.dev, ndev);
	if ((r = b->api.get_props(&b->api, b->o.dev, &props)))
		return call_fail("getProperties", r);
	if (link_up(b) || buffers(b))
		return -1;
	/* ipm.sh runs callgrind with --instr-atstart=no: set-up is not counted (and runs
	 * several times faster); the warm-up messages are, and cancel in N - M. */
	CALLGRIND_START_INSTRUMENTATION;
	if (stream(b, 1, b->o.warmup + b->o.msgs))
		return -1;
	CALLGRIND_DUMP_STATS_AT("stream");
	if (calibrate(b, b->o.warmup + b->o.msgs + 1, &isend_calls))
		return -1;
	if (teardown(b))
		return -1;
	printf("ipm: dev %d name %s api %d size %zu msgs %ld warmup %ld window %d idle_rtest %ld "
	       "idle_stest %ld null_isend %ld null_irecv %ld calib_rtest %ld calib_isend %ld "
	       "profiler_calls %ld\n",
	       b->o.dev, props.name, b->o.api, b->o.size, b->o.msgs, b->o.warmup, b->o.window,
	       b->idle.rtest, b->idle.stest, b->idle.null_isend, b->idle.null_irecv, b->o.idle,
	       isend_calls, ipm_prof_calls);
	if (b->o.profiler == 1 && !ipm_prof_calls)
		return fail("--profiler 1, yet the plugin never called the callback");
	return 0;
}

int main(int argc, char **argv)
{
	static struct ipm b;
	int rc = parse(argc, argv, &b.o);

	if (rc)
		return rc;
	b.deadline = now_s() + b.o.timeout_s;
	return run(&b) ? 1 : 0;
}
