// SPDX-License-Identifier: MIT
/*
 * softverbs: completion queues and completion channels.
 *
 * A CQ is a ring of struct ibv_wc under its own mutex. A completion channel
 * is a pipe: arming a CQ (ibv_req_notify_cq) makes the next completion write
 * the CQ's address into the pipe, so the channel fd works with poll() and
 * ibv_get_cq_event() reads which CQ fired.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/softverbs/sv_internal.h"

static struct sv_cq *to_cq(struct ibv_cq *c)
{
	return sv_container_of(c, struct sv_cq, ibcq);
}

SV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct sv_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		free(ch);
		return NULL;
	}
	/* The writer must never block: a full pipe already wakes the reader. */
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	ch->ch.context = context;
	ch->ch.fd = fds[0];
	ch->wfd = fds[1];
	return &ch->ch;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_channel *ch = sv_container_of(channel, struct sv_channel, ch);

	if (channel->refcnt)
		return EBUSY;
	close(ch->ch.fd);
	close(ch->wfd);
	free(ch);
	return 0;
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct sv_cq *cq;

	if (cqe < 1 || cqe > SV_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq || !(cq->ring = calloc((size_t)cqe + 1, sizeof(*cq->ring)))) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	cq->size = (uint32_t)cqe + 1;
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.cqe = cqe;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	if (channel) {
		pthread_mutex_lock(&sv_eng.lock);
		channel->refcnt++;
		pthread_mutex_unlock(&sv_eng.lock);
	}
	return &cq->ibcq;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = to_cq(ibcq);

	pthread_mutex_lock(&sv_eng.lock);
	if (cq->nqps) {
		pthread_mutex_unlock(&sv_eng.lock);
		return EBUSY;
	}
	if (ibcq->channel)
		ibcq->channel->refcnt--;
	pthread_mutex_unlock(&sv_eng.lock);
	pthread_mutex_destroy(&cq->lock);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	free(cq->ring);
	free(cq);
	return 0;
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_cq *cq = to_cq(ibcq);
	struct sv_cqe *ring;

	if (cqe < 1 || cqe > SV_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	if ((uint32_t)cqe < cq->count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	ring = calloc((size_t)cqe + 1, sizeof(*ring));
	if (!ring) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < cq->count; i++)
		ring[i] = cq->ring[(cq->head + i) % cq->size];
	free(cq->ring);
	cq->ring = ring;
	cq->head = 0;
	cq->size = (uint32_t)cqe + 1;
	ibcq->cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* Called by the library (any thread) with sv_eng.lock held. sq_owner and
 * sq_next: see struct sv_cqe (NULL, 0 for a receive). */
void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, bool solicited, struct sv_qp *sq_owner,
		uint64_t sq_next)
{
	bool notify = false, overrun = false;

	pthread_mutex_lock(&cq->lock);
	if (cq->count + 1 >= cq->size) {
		overrun = true;
	} else {
		cq->ring[(cq->head + cq->count) % cq->size] = (struct sv_cqe){
			.wc = *wc,
			.sq_owner = sq_owner,
			.sq_next = sq_next,
		};
		cq->count++;
		/* Solicited-only arming wakes on a receive the sender marked
		 * IBV_SEND_SOLICITED, or on an error. */
		if (cq->armed &&
		    (!cq->solicited_only || solicited || wc->status != IBV_WC_SUCCESS)) {
			cq->armed = false;
			notify = true;
		}
	}
	pthread_mutex_unlock(&cq->lock);
	if (overrun) {
		sv_log("CQ %p overrun: completion for wr_id %llu dropped", (void *)cq,
		       (unsigned long long)wc->wr_id);
		sv_async_event(sv_container_of(cq->ibcq.context, struct sv_context, vctx.context),
			       IBV_EVENT_CQ_ERR, &cq->ibcq, 0);
		return;
	}
	if (notify && cq->ibcq.channel) {
		struct sv_channel *ch = sv_container_of(cq->ibcq.channel, struct sv_channel, ch);
		struct ibv_cq *p = &cq->ibcq;

		if (write(ch->wfd, &p, sizeof(p)) != (ssize_t)sizeof(p))
			sv_debug("completion channel pipe full");
	}
}

int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sv_cq *cq = to_cq(ibcq);
	int got = 0;

	if (n < 0)
		return -1;
	pthread_mutex_lock(&cq->lock);
	while (got < n && cq->count) {
		struct sv_cqe *e = &cq->ring[cq->head];

		wc[got++] = e->wc;
		/* A polled send completion frees its WR's send queue slot and
		 * those of the unsignaled WRs before it. Completions of a QP
		 * come in order, so sq_next only grows. */
		if (e->sq_owner)
			__atomic_store_n(&e->sq_owner->sq_polled, e->sq_next, __ATOMIC_RELEASE);
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	/* Busy pollers must not starve the rx/tx threads that produce the
	 * completions they wait for (test machines have few cores). */
	if (!got)
		sched_yield();
	return got;
}

/* qp is being destroyed or reset: its completions still in the CQ stay
 * (the application may poll them) but no longer point at it. */
void sv_cq_forget_qp(struct sv_cq *cq, struct sv_qp *qp)
{
	pthread_mutex_lock(&cq->lock);
	for (uint32_t i = 0; i < cq->count; i++) {
		struct sv_cqe *e = &cq->ring[(cq->head + i) % cq->size];

		if (e->sq_owner == qp)
			e->sq_owner = NULL;
	}
	pthread_mutex_unlock(&cq->lock);
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sv_cq *cq = to_cq(ibcq);

	if (!ibcq->channel)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	cq->armed = true;
	cq->solicited_only = solicited_only != 0;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context)
{
	struct ibv_cq *p;

	if (read(channel->fd, &p, sizeof(p)) != (ssize_t)sizeof(p))
		return -1;
	*cq = p;
	*cq_context = p->cq_context;
	return 0;
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
