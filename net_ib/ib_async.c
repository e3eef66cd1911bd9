// SPDX-License-Identifier: Apache-2.0
/*
 * Async events of an HCA: the comms whose rails live on it (the list the events are
 * matched against), and what each event does to them. Events are drained without blocking
 * from the data path (ib_check_health, a completion error), under the HCA lock.
 */
#include <stdio.h>

#include "net_ib/ib.h"
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

void ib_async_poll(struct ib_hca *h)
{
	struct ibv_async_event e;

	pthread_mutex_lock(&h->lock);
	for (int i = 0; i < 64 && ibv.get_async_event(h->ctx, &e) == 0; i++) {
		handle_event(h, &e);
		ibv.ack_async_event(&e);
	}
	pthread_mutex_unlock(&h->lock);
}
