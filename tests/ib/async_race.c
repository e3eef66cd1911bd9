// SPDX-License-Identifier: Apache-2.0
/*
 * net_ib's async event dispatch against the comms it marks, on a device fused from two
 * softverbs RoCE NICs (two HCAs, two HCA locks). Run by tests/ib/async-race.sh and, under
 * ThreadSanitizer, by tests/tsan/ib-async.sh; TSan is what sees the races, the checks
 * below what a race would garble.
 *
 *   building  a thread drains QP events on svroce0 (the real ib_async_poll, with every
 *             event naming a QP of no comm) while the main thread connects and closes
 *             fused comms: the dispatch walks the HCA's comm list, so it must never
 *             see a comm whose QPs are still being created.
 *   fatal     two threads, one per HCA, each dispatch IBV_EVENT_DEVICE_FATAL at the same
 *             moment to the same fused comms: the two HCA locks order nothing between
 *             them, so exactly one event may write the comm's report.
 *
 * The events are the test's (softverbs raises none of these on demand): it wraps
 * ibv.get_async_event, so they go through net_ib's dispatch exactly as the device's own.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net_ib/ib.h"
#include "plugin/core.h"
#include "plugin/params.h"
#include "plugin/vdev.h"

#define BUILD_ROUNDS 12
#define FATAL_ROUNDS 400
#define BOUND_S 60

static int failures;

#define CHECK(cond, ...)                                       \
	do {                                                   \
		if (!(cond)) {                                 \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fprintf(stderr, " (%s)\n", #cond);     \
			failures++;                            \
		}                                              \
	} while (0)

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	va_list ap;

	(void)flags, (void)file, (void)line;
	if (level != NCCL_LOG_WARN && !getenv("ASYNC_RACE_VERBOSE"))
		return;
	va_start(ap, fmt);
	fputs("WARN ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static time_t deadline;

static int past_deadline(void)
{
	return time(NULL) > deadline;
}

/* ---- the events: per HCA context, what the next get_async_event returns ---- */

enum fake_mode { FAKE_NONE, FAKE_STRAY_QP, FAKE_DEVICE_FATAL };

static int (*real_get_async_event)(struct ibv_context *ctx, struct ibv_async_event *event);
static void (*real_ack_async_event)(struct ibv_async_event *event);
static struct ibv_qp stray_qp; /* a QP no comm holds */
static int fake_mode[2];       /* atomic, per HCA */
static int fake_left[2];       /* events still to give on this poll; under the HCA's lock, as
				* ib_async_poll reads events (connect and listen poll too) */

static int hca_of(const struct ibv_context *ctx)
{
	for (int i = 0; i < 2 && i < ib.nhcas; i++)
		if (ib.hcas[i].ctx == ctx)
			return i;
	return -1;
}

static int fake_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	int h = hca_of(ctx);
	int mode = h < 0 ? FAKE_NONE : __atomic_load_n(&fake_mode[h], __ATOMIC_ACQUIRE);

	if (mode == FAKE_NONE || fake_left[h] <= 0)
		return real_get_async_event(ctx, event);
	fake_left[h]--;
	memset(event, 0, sizeof(*event));
	if (mode == FAKE_STRAY_QP) {
		event->event_type = IBV_EVENT_QP_FATAL;
		event->element.qp = &stray_qp;
	} else {
		event->event_type = IBV_EVENT_DEVICE_FATAL;
	}
	return 0;
}

static void fake_ack_async_event(struct ibv_async_event *event)
{
	if (event->event_type == IBV_EVENT_QP_FATAL && event->element.qp == &stray_qp)
		return;
	if (event->event_type == IBV_EVENT_DEVICE_FATAL)
		return; /* softverbs raises none in this test: ours */
	real_ack_async_event(event);
}

/* The fused device's index, or -1. */
static int fused_dev(void)
{
	int n;

	if (braid_devices(&n) != ncclSuccess)
		return -1;
	for (int d = 0; d < n; d++)
		if (braid_vdev_get(d)->n == 2)
			return d;
	return -1;
}

static int connect_pair(int dev, void **lc, struct ib_comm **sc, struct ib_comm **rc)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *s = NULL, *r = NULL;

	if (braid_listen(dev, handle, lc) != ncclSuccess)
		return -1;
	while ((!s || !r) && !past_deadline()) {
		if (!s && braid_connect(dev, NULL, handle, &s, NULL) != ncclSuccess)
			return -1;
		if (!r && braid_accept(*lc, &r, NULL) != ncclSuccess)
			return -1;
	}
	*sc = s;
	*rc = r;
	return s && r ? 0 : -1;
}

static void close_pair(void *lc, struct ib_comm *sc, struct ib_comm *rc)
{
	braid_close_send(sc);
	braid_close_recv(rc);
	braid_close_listen(lc);
}

/* ---- building: comms connect while another thread dispatches QP events ---- */

static int stop_poller;

static void *stray_poller(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop_poller, __ATOMIC_ACQUIRE) && !past_deadline()) {
		pthread_mutex_lock(&ib.hcas[0].lock);
		fake_left[0] = 8;
		pthread_mutex_unlock(&ib.hcas[0].lock);
		ib_async_poll(&ib.hcas[0]);
		sched_yield();
	}
	return NULL;
}

static void building(int dev)
{
	pthread_t t;

	__atomic_store_n(&fake_mode[0], FAKE_STRAY_QP, __ATOMIC_RELEASE);
	pthread_create(&t, NULL, stray_poller, NULL);
	for (int i = 0; i < BUILD_ROUNDS && !past_deadline(); i++) {
		struct ib_comm *sc, *rc;
		void *lc;

		if (connect_pair(dev, &lc, &sc, &rc)) {
			CHECK(0, "building: round %d: connecting the fused pair failed", i);
			break;
		}
		CHECK(sc->nrails == 2 && rc->nrails == 2, "building: the comms are not fused");
		/* the events named a QP of no comm: none may be marked */
		CHECK(!__atomic_load_n(&sc->async_error, __ATOMIC_ACQUIRE) &&
			      !__atomic_load_n(&rc->async_error, __ATOMIC_ACQUIRE),
		      "building: round %d: a stray QP event marked a comm", i);
		close_pair(lc, sc, rc);
	}
	__atomic_store_n(&stop_poller, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	__atomic_store_n(&fake_mode[0], FAKE_NONE, __ATOMIC_RELEASE);
	printf("building: %d fused connects while svroce0 dispatched QP events\n", BUILD_ROUNDS);
}

/* ---- fatal: both HCAs of the fused comms dispatch at once ---- */

static int round_no; /* atomic: the round the main thread opened */
static int gate;     /* atomic: pollers that reached this round's start, over all rounds */
static int polled;   /* atomic: pollers done with their round, over all rounds */

static void *fatal_poller(void *arg)
{
	int h = (int)(intptr_t)arg;

	for (int r = 1; r <= FATAL_ROUNDS && !past_deadline(); r++) {
		while (__atomic_load_n(&round_no, __ATOMIC_ACQUIRE) < r && !past_deadline())
			sched_yield();
		pthread_mutex_lock(&ib.hcas[h].lock);
		fake_left[h] = 1;
		pthread_mutex_unlock(&ib.hcas[h].lock);
		/* Spin (bounded by the deadline) until the other poller is here too: spinning,
		 * not sleeping, so both dispatch within a few hundred nanoseconds. */
		__atomic_add_fetch(&gate, 1, __ATOMIC_ACQ_REL);
		while (__atomic_load_n(&gate, __ATOMIC_ACQUIRE) < 2 * r && !past_deadline())
			;
		ib_async_poll(&ib.hcas[h]);
		__atomic_add_fetch(&polled, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* The report of one comm after a round: set, and written by one event whole. */
static void check_report(struct ib_comm *c, int r, const char *which)
{
	static const char *want[2] = { "async event on svroce0: ", "async event on svroce1: " };
	int err = __atomic_load_n(&c->async_error, __ATOMIC_ACQUIRE);

	CHECK(err == ncclSystemError, "fatal: round %d: %s comm not marked (%d)", r, which, err);
	CHECK(!strncmp(c->async_why, want[0], strlen(want[0])) ||
		      !strncmp(c->async_why, want[1], strlen(want[1])),
	      "fatal: round %d: %s comm's report is \"%s\"", r, which, c->async_why);
	CHECK(c->async_qp == 0, "fatal: round %d: %s comm names QP %d for a device event", r, which,
	      c->async_qp);
}

static void rearm(struct ib_comm *c)
{
	memset(c->async_why, 0, sizeof(c->async_why));
	c->async_qp = 0;
	__atomic_store_n(&c->async_claim, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->async_error, 0, __ATOMIC_RELEASE);
}

static void fatal(int dev)
{
	struct ib_comm *sc, *rc;
	pthread_t t[2];
	void *lc;
	int r, rounds = 0;

	if (connect_pair(dev, &lc, &sc, &rc)) {
		CHECK(0, "fatal: connecting the fused pair failed");
		return;
	}
	CHECK(sc->rails[0].hca != sc->rails[1].hca, "fatal: the send comm's NICs share an HCA");
	for (int h = 0; h < 2; h++)
		__atomic_store_n(&fake_mode[h], FAKE_DEVICE_FATAL, __ATOMIC_RELEASE);
	for (int h = 0; h < 2; h++)
		pthread_create(&t[h], NULL, fatal_poller, (void *)(intptr_t)h);
	for (r = 1; r <= FATAL_ROUNDS && !past_deadline(); r++) {
		__atomic_store_n(&round_no, r, __ATOMIC_RELEASE);
		while (__atomic_load_n(&polled, __ATOMIC_ACQUIRE) < 2 * r && !past_deadline())
			sched_yield();
		if (past_deadline())
			break;
		check_report(sc, r, "send");
		check_report(rc, r, "receive");
		rearm(sc);
		rearm(rc);
		rounds = r;
	}
	__atomic_store_n(&round_no, FATAL_ROUNDS + 1, __ATOMIC_RELEASE);
	for (int h = 0; h < 2; h++)
		pthread_join(t[h], NULL);
	for (int h = 0; h < 2; h++)
		__atomic_store_n(&fake_mode[h], FAKE_NONE, __ATOMIC_RELEASE);
	close_pair(lc, sc, rc);
	CHECK(rounds == FATAL_ROUNDS, "fatal: %d of %d rounds before the deadline", rounds,
	      FATAL_ROUNDS);
	printf("fatal: %d rounds of DEVICE_FATAL on svroce0 and svroce1 at once\n", rounds);
}

int main(void)
{
	int dev;

	setenv("BRAID_BACKEND", "ib", 1);
	setenv("SOFTVERBS_DEVICES", "svroce0:roce:1,svroce1:roce:1", 1);
	setenv("BRAID_IB_HCA", "=svroce0,svroce1", 1);
	setenv("BRAID_MERGE", "svroce0+svroce1", 1);
	setenv("BRAID_SOCKET_IFNAME", "lo", 1);
	braid_params_reset();
	deadline = time(NULL) + BOUND_S;
	if (braid_init(logger, 11) != ncclSuccess) {
		fprintf(stderr, "FAIL: braid_init on softverbs (LD_LIBRARY_PATH?)\n");
		return 1;
	}
	dev = fused_dev();
	if (dev < 0 || ib.nhcas < 2) {
		fprintf(stderr, "FAIL: no device fused from svroce0 and svroce1\n");
		return 1;
	}
	real_get_async_event = ibv.get_async_event;
	real_ack_async_event = ibv.ack_async_event;
	ibv.get_async_event = fake_get_async_event;
	ibv.ack_async_event = fake_ack_async_event;
	building(dev);
	fatal(dev);
	ibv.get_async_event = real_get_async_event;
	ibv.ack_async_event = real_ack_async_event;
	braid_finalize();
	CHECK(!past_deadline(), "took longer than %d s", BOUND_S);
	if (failures)
		return 1;
	printf("async-race: all passed\n");
	return 0;
}
