// SPDX-License-Identifier: Apache-2.0
/*
 * Async events of an HCA: the comms whose rails live on it (the list the events are
 * matched against), and what each event does to them. Events are drained without blocking,
 * under the HCA lock, by a thread as they come and by the data path (ib_check_health, a
 * completion error).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_ib/ib.h"
#include "plugin/bg_thread.h"
#include "plugin/clock.h"
#include "plugin/log.h"
#include "plugin/params.h"

void ib_rail_register(struct ib_rail *rl)
{
	struct ib_hca *h = rl->hca;

	pthread_mutex_lock(&h->lock);
	rl->next = h->comms;
	h->comms = rl;
	pthread_mutex_unlock(&h->lock);
}

void ib_rail_unregister(struct ib_rail *rl)
{
	struct ib_hca *h = rl->hca;

	pthread_mutex_lock(&h->lock);
	for (struct ib_rail **pp = &h->comms; *pp; pp = &(*pp)->next)
		if (*pp == rl) {
			*pp = rl->next;
			break;
		}
	pthread_mutex_unlock(&h->lock);
}

/*
 * The first event to hit c writes its report (QP qi, why) and then publishes async_error.
 * A fused comm hears events through each of its HCAs, under that HCA's lock, so the locks
 * order nothing between two of them: the claim does. The comm's thread reads the report
 * only after it has seen async_error.
 */
static void mark_comm(struct ib_comm *c, int qi, ncclResult_t rc, const struct ib_hca *h,
		      const char *what)
{
	int unclaimed = 0;

	if (!__atomic_compare_exchange_n(&c->async_claim, &unclaimed, 1, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	c->async_qp = qi;
	snprintf(c->async_why, sizeof(c->async_why), "async event on %s: %s", h->name, what);
	__atomic_store_n(&c->async_error, (int)rc, __ATOMIC_RELEASE);
}

uint64_t ib_retry_budget_ns(void)
{
	int64_t t = braid_param_int(BRAID_P_IB_TIMEOUT), n = braid_param_int(BRAID_P_IB_RETRY_CNT);

	return (uint64_t)(4096.0 * (double)(1ull << t) * (double)(n + 1));
}

/*
 * A port went down or came back. Not fatal, as in NCCL's IB transport (common.cc: a
 * non-fatal event): RC retries carry the comms over a flap shorter than the retry budget,
 * and a QP with traffic fails once the budget is spent (ib_cq.c names the port then).
 * Caller holds h->lock.
 */
static void port_event(const struct ib_hca *h, int port, int down, const char *what)
{
	uint64_t now = braid_now_ns();

	for (int d = 0; d < ib.ndevs; d++) {
		struct ib_dev *dv = &ib.devs[d];
		uint64_t was = __atomic_load_n(&dv->down_ns, __ATOMIC_ACQUIRE);

		if (dv->hca != h || dv->port != port || !was == !down)
			continue;
		__atomic_store_n(&dv->down_ns, down ? now : 0, __ATOMIC_RELEASE);
		if (dv->ctr) /* braid stat: the lanes on it are down */
			__atomic_store_n(&dv->ctr->port_down, down ? 1u : 0u, __ATOMIC_RELAXED);
		if (down)
			BRAID_WARN("ib: %s:%d: %s: the port is down; its comms wait for it, and "
				   "a QP with traffic fails if it is not back within the retry "
				   "budget, %.1f s (NCCL_IB_TIMEOUT=%d, NCCL_IB_RETRY_CNT=%d)",
				   dv->name, port, what, (double)ib_retry_budget_ns() / 1e9,
				   (int)braid_param_int(BRAID_P_IB_TIMEOUT),
				   (int)braid_param_int(BRAID_P_IB_RETRY_CNT));
		else
			BRAID_WARN("ib: %s:%d: %s: the port is back after %.1f s", dv->name, port,
				   what, (double)(now - was) / 1e9);
	}
}

/* Caller holds h->lock. */
static void handle_event(struct ib_hca *h, const struct ibv_async_event *e)
{
	const char *what = ibv.event_type_str(e->event_type);

	switch (e->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
		/* Compare pointers only: the QP may already be gone. */
		for (struct ib_rail *rl = h->comms; rl; rl = rl->next) {
			struct ib_comm *c = rl->comm;

			for (int i = 0; i < c->nqps; i++)
				if (c->qps[i].qp == e->element.qp)
					mark_comm(c, i, ncclRemoteError, h, what);
		}
		break;
	case IBV_EVENT_CQ_ERR:
		for (struct ib_rail *rl = h->comms; rl; rl = rl->next)
			if (rl->cq == e->element.cq)
				mark_comm(rl->comm, 0, ncclSystemError, h, what);
		break;
	case IBV_EVENT_DEVICE_FATAL:
		for (struct ib_rail *rl = h->comms; rl; rl = rl->next)
			mark_comm(rl->comm, 0, ncclSystemError, h, what);
		break;
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_PORT_ACTIVE:
		port_event(h, e->element.port_num, e->event_type == IBV_EVENT_PORT_ERR, what);
		break;
	default: BRAID_TRACE("ib: %s: async event %s", h->name, what); break;
	}
}

/* Caller holds h->lock; the events taken. */
static int drain_events(struct ib_hca *h)
{
	struct ibv_async_event e;
	int n = 0;

	while (n < 64 && ibv.get_async_event(h->ctx, &e) == 0) {
		handle_event(h, &e);
		ibv.ack_async_event(&e);
		n++;
	}
	return n;
}

void ib_async_poll(struct ib_hca *h)
{
	pthread_mutex_lock(&h->lock);
	drain_events(h);
	pthread_mutex_unlock(&h->lock);
}

/*
 * A thread drains the HCAs' events as they come, as NCCL's IB transport has one per
 * device (ncclIbAsyncThread): a port that goes down under idle comms is WARNed and shown
 * in braid stat at once, not at the next wait of a comm on it. The data path drains them
 * too (a completion error names the port at once); both under the HCA lock, which the
 * thread only tries (a registration may hold it long, and a stop joins the thread at
 * exit whoever holds it): busy, it looks again 10 ms later.
 */
static struct braid_bg async_bg = BRAID_BG_INIT;

/* 1 when an HCA had events and its lock was busy, or had none though its fd was
 * readable (a provider's partial read): both are looked at again 10 ms later. An fd in
 * error with nothing to read (a device removed) is polled no more. */
static int drain_ready(struct pollfd *p, int n)
{
	int again = 0, got;

	for (int i = 0; i < n; i++) {
		struct ib_hca *h = &ib.hcas[i];

		if (!p[i].revents)
			continue;
		if (pthread_mutex_trylock(&h->lock)) {
			again = 1;
			continue;
		}
		got = drain_events(h);
		pthread_mutex_unlock(&h->lock);
		if (!got && (p[i].revents & (POLLERR | POLLHUP | POLLNVAL))) {
			BRAID_INFO(NCCL_NET,
				   "ib: %s: its async event file is in error: events are read no "
				   "more by the thread",
				   h->name);
			p[i].fd = -1;
		} else {
			again |= !got;
		}
	}
	return again;
}

static void *async_main(void *arg)
{
	struct pollfd *p = arg;
	int n = ib.nhcas, again = 0;

	p[n] = (struct pollfd){ .fd = async_bg.wake, .events = POLLIN };
	for (;;) {
		/* after a busy lock, only the wake fd for 10 ms: the HCAs' stay readable */
		int rc = again ? poll(p + n, 1, 10) : poll(p, (nfds_t)n + 1, -1);

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0) {
			BRAID_WARN("ib: the async event thread stops: poll failed: %s",
				   strerror(errno));
			break;
		}
		if (p[n].revents)
			break;
		again = again ? 0 : drain_ready(p, n);
	}
	free(p);
	return NULL;
}

void ib_async_start(void)
{
	struct pollfd *p = calloc((size_t)ib.nhcas + 1, sizeof(*p)); /* + the wake fd */
	int rc;

	if (!p)
		return;
	for (int i = 0; i < ib.nhcas; i++)
		p[i] = (struct pollfd){ .fd = ib.hcas[i].ctx->async_fd, .events = POLLIN };
	rc = braid_bg_start(&async_bg, async_main, p);
	if (rc) {
		BRAID_INFO(NCCL_INIT | NCCL_NET,
			   "ib: no async event thread (%s): events are read when a comm waits",
			   strerror(-rc));
		free(p);
	}
}

void ib_async_stop(void)
{
	(void)braid_bg_stop(&async_bg); /* -1 cannot happen with an eventfd (bg_thread.h) */
}
