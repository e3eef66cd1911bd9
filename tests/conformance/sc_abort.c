// SPDX-License-Identifier: Apache-2.0
/*
 * Closing with requests in flight, as ncclCommAbort does (issue 19): NCCL stops testing,
 * deregisters its buffers and closes every comm while sends and receives are still
 * posted, each rank on its own, with no synchronisation between them. Every one of those
 * calls must succeed promptly, and a later comm on the same device must work.
 *
 * NCCL's IB transport sees only its FIFO: a receive the peer posted (and so announced) is
 * a valid match for isend whatever the peer did afterwards, so such an isend returns a
 * request (or NULL while the announcement is on its way), never an error; what became of
 * the send is test()'s to say. The "closed" variant makes that case certain: a posts its
 * receives, lets their announcements arrive, closes everything, and only then does b send.
 * In the rounds with no synchronisation a receive may be closed before its announcement
 * left (a QP destroyed with its FIFO write still queued), and braid refuses a receive
 * posted after the peer's goodbye (docs/contract.md): there an isend or irecv error ends
 * the round's posting, and what must hold is the prompt, clean deregister and close, and
 * the next round's comms working.
 */
#include "tests/conformance/conf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ABORT_MSGS 8
#define ABORT_SIZE (1u << 20)
#define ABORT_ROUNDS 10
#define ABORT_THREADS 4
#define ABORT_ISEND_BOUND_S 5.0 /* an announced receive reaches the sender by then */
#define ABORT_SETTLE_S 0.5      /* "closed": the announcements have arrived by then */

struct abort_pair {
	struct side s;
	void *ctx;
	char base[16]; /* the pair's name; name is base.rROUND */
	char name[48];
	void *lc, *rc, *sc;
	char *sbuf, *rbuf;
	void *smh, *rmh;
	int rc_out;
};

static int check(struct side *s, ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return 0;
	return conf_fail(s, "%s returned %s (%d)", what, netapi_result_str(r), r);
}

/* Both directions between a and b: a receives on "NAME.ab", b on "NAME.ba". */
static int pair_open(struct abort_pair *p)
{
	struct side *s = &p->s;
	char ab[64], ba[64];

	snprintf(ab, sizeof(ab), "%s.ab", p->name);
	snprintf(ba, sizeof(ba), "%s.ba", p->name);
	if (s->role == 'a') {
		if (link_accept(s, p->ctx, ab, &p->lc, &p->rc) ||
		    link_connect(s, p->ctx, ba, &p->sc))
			return -1;
	} else {
		void *lc2 = NULL;

		if (link_connect(s, p->ctx, ab, &p->sc) || link_accept(s, p->ctx, ba, &lc2, &p->rc))
			return -1;
		p->lc = lc2;
	}
	p->sbuf = malloc(ABORT_MSGS * (size_t)ABORT_SIZE);
	p->rbuf = malloc(ABORT_MSGS * (size_t)ABORT_SIZE);
	if (!p->sbuf || !p->rbuf)
		return conf_fail(s, "out of memory");
	memset(p->sbuf, s->role, ABORT_MSGS * (size_t)ABORT_SIZE);
	if (check(s,
		  s->api->reg_mr(s->api, p->sc, p->sbuf, ABORT_MSGS * (size_t)ABORT_SIZE, &p->smh),
		  "regMr(send)") ||
	    check(s,
		  s->api->reg_mr(s->api, p->rc, p->rbuf, ABORT_MSGS * (size_t)ABORT_SIZE, &p->rmh),
		  "regMr(recv)"))
		return -1;
	return 0;
}

/* strict: an error fails the scenario; else it ends the posting (the peer has gone). */
static int post_recvs(struct abort_pair *p, void **req, bool strict)
{
	struct side *s = &p->s;

	for (int i = 0; i < ABORT_MSGS; i++) {
		void *data = p->rbuf + (size_t)i * ABORT_SIZE, *mh = p->rmh;
		size_t size = ABORT_SIZE;
		int tag = i;

		ncclResult_t r;

		conf_step(s, "%s: irecv %d", p->name, i);
		r = s->api->irecv(s->api, p->rc, 1, &data, &size, &tag, &mh, &req[i]);
		if (r != ncclSuccess && !strict) {
			conf_log(s, "%s: irecv %d: %s (the peer closed)", p->name, i,
				 netapi_result_str(r));
			return 0;
		}
		if (check(s, r, "irecv"))
			return -1;
		if (!req[i])
			return conf_fail(s, "irecv %d returned no request with the window free", i);
	}
	return 0;
}

/* isend each message until it returns a request, within bound_s; NULL means the
 * announcement has not come yet. With wait_all (the peer's receives were announced before
 * it closed) every send must get a request and an error is a failure; otherwise stop at
 * the first error or at a NULL past the bound, as an aborting NCCL would. */
static int post_sends(struct abort_pair *p, void **req, bool wait_all, double bound_s)
{
	struct side *s = &p->s;
	double until = now_s() + bound_s;

	for (int i = 0; i < ABORT_MSGS; i++) {
		conf_step(s, "%s: isend %d", p->name, i);
		do {
			ncclResult_t r = s->api->isend(s->api, p->sc,
						       p->sbuf + (size_t)i * ABORT_SIZE, ABORT_SIZE,
						       i, p->smh, &req[i]);

			if (r != ncclSuccess && !wait_all) {
				conf_log(s, "%s: isend %d: %s (the peer closed)", p->name, i,
					 netapi_result_str(r));
				return 0;
			}
			if (r != ncclSuccess)
				return conf_fail(s,
						 "isend %d returned %s (%d) for a receive the peer "
						 "announced: NCCL's IB transport returns a request",
						 i, netapi_result_str(r), r);
			if (!req[i])
				idle_wait();
		} while (!req[i] && now_s() < until);
		if (!req[i])
			return wait_all ? conf_fail(s,
						    "isend %d: no request within %.0f s although "
						    "the peer posted the receive",
						    i, bound_s)
					: 0;
	}
	return 0;
}

/*
 * Send buffers a provider may still read after deregMr and close: libfabric has no way to
 * take a send back on a shared endpoint (fi_cancel is for receives), and tcp;ofi_rxm sends
 * a rendezvous part when the peer pulls it, which under ASan and load came 200 ms and more
 * after the last completion, past deregMr's wait (docs/contract.md: narrowed, not
 * closed). So on net_ofi they are kept until the process exits (the scenarios after this
 * one move the same endpoints); receive buffers, which deregMr takes back, are freed where
 * NCCL frees them. A NIC stops its DMA at ibv_dereg_mr (softverbs' copies too).
 */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static char **kept;
static size_t nkept;

static void kept_free(void)
{
	for (size_t i = 0; i < nkept; i++)
		free(kept[i]);
	free(kept);
	kept = NULL;
	nkept = 0;
}

static void free_send_buffer(char *buf)
{
	const char *backend = getenv("BRAID_BACKEND");
	char **more;

	if (!buf || (backend && !strcmp(backend, "ib"))) {
		free(buf);
		return;
	}
	pthread_mutex_lock(&kept_lock);
	if (!kept)
		atexit(kept_free);
	more = realloc(kept, (nkept + 1) * sizeof(*kept));
	if (more) {
		kept = more;
		kept[nkept++] = buf;
	} /* else it leaks, at worst: better than a provider reading freed memory */
	pthread_mutex_unlock(&kept_lock);
}

/* Whatever is in flight: test once (NCCL may have), deregister, close everything. */
static int pair_abort(struct abort_pair *p, void **reqs, int nreqs)
{
	struct side *s = &p->s;
	double t0 = now_s();
	int rc = 0;

	for (int i = 0; i < nreqs; i++) {
		int done = 0, size = 0;

		if (reqs[i])
			(void)s->api->test(s->api, reqs[i], &done, &size); /* any answer is fine */
	}
	conf_step(s, "%s: deregMr with requests in flight", p->name);
	if (p->smh)
		rc |= check(s, s->api->dereg_mr(s->api, p->sc, p->smh), "deregMr(send)");
	if (p->rmh)
		rc |= check(s, s->api->dereg_mr(s->api, p->rc, p->rmh), "deregMr(recv)");
	p->smh = p->rmh = NULL;
	/* NCCL frees the memory between deregMr and close (net.cc recvProxyFree and
	 * sendProxyFree: ncclCudaHostFree, then closeRecv): 8 MiB each, so free() unmaps
	 * them and a provider still copying into them faults (a send's buffer: above) */
	free_send_buffer(p->sbuf);
	free(p->rbuf);
	p->sbuf = p->rbuf = NULL;
	if (close_comms(s, p->sc, p->rc, p->lc))
		rc = -1;
	free(p->sbuf);
	free(p->rbuf);
	p->sbuf = p->rbuf = NULL;
	p->sc = p->rc = p->lc = NULL;
	if (now_s() - t0 > CONF_CLOSE_TIMEOUT_S)
		rc = conf_fail(s, "%s: deregister and close took %.1f s", p->name, now_s() - t0);
	return rc ? -1 : 0;
}

static void *abort_rounds(void *argp)
{
	struct abort_pair *p = argp;

	p->rc_out = 0;
	for (int r = 0; r < ABORT_ROUNDS && !p->rc_out; r++) {
		void *reqs[2 * ABORT_MSGS] = { 0 };

		snprintf(p->name, sizeof(p->name), "%s.r%d", p->base, r);
		if (pair_open(p) || post_recvs(p, reqs, false) ||
		    post_sends(p, reqs + ABORT_MSGS, false, 0.2))
			p->rc_out = -1;
		if (pair_abort(p, reqs, 2 * ABORT_MSGS))
			p->rc_out = -1;
	}
	if (!p->rc_out)
		conf_log(&p->s, "%s: %d rounds of 8 x 1 MiB each way, closed in flight", p->base,
			 ABORT_ROUNDS);
	return NULL;
}

/*
 * ncclCommAbort as NCCL 2.28 runs it for a job's only communicator, round after round
 * (tests/nccl/nccl_abort.c on a GPU): v11's init for the communicator, its comms, traffic
 * in flight, deregMr and close, then the communicator's finalize, the last one, so the
 * backend closes its devices; the next round's init opens them again. On a GPU this
 * crashed the second round in libfabric (a CQ read while closing).
 */
int sc_abort_reinit(struct side *s)
{
	struct abort_pair p = { .s = *s };
	int rc = 0;

	snprintf(p.base, sizeof(p.base), "reinit");
	for (int r = 0; r < ABORT_ROUNDS && !rc; r++) {
		void *reqs[2 * ABORT_MSGS] = { 0 };
		ncclResult_t res;

		snprintf(p.name, sizeof(p.name), "reinit.r%d", r);
		conf_step(s, "%s: init", p.name);
		res = s->api->init(s->api, &p.ctx, s->seed + (uint64_t)r);
		if (check(s, res, "init"))
			return -1;
		if (pair_open(&p) || post_recvs(&p, reqs, false) ||
		    post_sends(&p, reqs + ABORT_MSGS, false, 0.2))
			rc = -1;
		if (pair_abort(&p, reqs, 2 * ABORT_MSGS))
			rc = -1;
		conf_step(s, "%s: finalize", p.name);
		rc |= check(s, s->api->finalize(s->api, p.ctx), "finalize");
		p.ctx = NULL;
	}
	if (!rc)
		conf_log(s, "%d rounds of init, 8 x 1 MiB each way closed in flight, finalize",
			 ABORT_ROUNDS);
	return rc ? -1 : 0;
}

/* test each request until all are done, within CONF_ERROR_BOUND_S; 0 when all succeeded. */
static int wait_all_done(struct abort_pair *p, void **reqs, int n)
{
	struct side *s = &p->s;
	double until = now_s() + CONF_ERROR_BOUND_S;
	int left = n;

	while (left && now_s() < until) {
		left = 0;
		for (int i = 0; i < n; i++) {
			int done = 0, size = 0;

			if (!reqs[i])
				continue;
			if (check(s, s->api->test(s->api, reqs[i], &done, &size), "test"))
				return -1;
			if (done)
				reqs[i] = NULL;
			else
				left++;
		}
		if (left)
			idle_wait();
	}
	return left ? conf_fail(s, "%d request(s) not done within %.0f s", left, CONF_ERROR_BOUND_S)
		    : 0;
}

/*
 * deregMr of a registration no request uses, while the comm's other requests are in
 * flight: ncclCommDeregister, which NCCL's proxy service thread runs while the comm goes
 * on. Nothing in flight may notice: every receive completes, every byte right. (net_ofi's
 * deregMr takes back what is posted on the memory it deregisters, for ncclCommAbort; here
 * there is none.)
 */
int sc_dereg_idle(struct side *s)
{
	struct abort_pair p = { .s = *s, .ctx = s->ctx };
	void *reqs[ABORT_MSGS] = { 0 }, *mh = NULL;
	static char idle[1 << 16];
	int rc;

	snprintf(p.name, sizeof(p.name), "dereg-idle");
	if (pair_open(&p))
		return pair_abort(&p, reqs, 0), -1;
	if (s->role == 'a') {
		rc = check(s, s->api->reg_mr(s->api, p.rc, idle, sizeof(idle), &mh),
			   "regMr(idle)") ||
		     post_recvs(&p, reqs, true);
		conf_step(s, "deregMr of an idle registration with 8 receives in flight");
		if (!rc)
			rc = check(s, s->api->dereg_mr(s->api, p.rc, mh), "deregMr(idle)");
		if (!rc)
			rc = wait_all_done(&p, reqs, ABORT_MSGS);
		for (size_t i = 0; !rc && i < ABORT_MSGS * (size_t)ABORT_SIZE; i++)
			if (p.rbuf[i] != 'b')
				rc = conf_fail(s, "byte %zu is %#x, not 'b'", i,
					       (unsigned)(unsigned char)p.rbuf[i]);
	} else {
		rc = post_sends(&p, reqs, true, ABORT_ISEND_BOUND_S) ||
		     wait_all_done(&p, reqs, ABORT_MSGS);
	}
	rc |= pair_abort(&p, reqs, ABORT_MSGS);
	return rc ? -1 : 0;
}

/* a posts its receives and closes everything; then b sends into them. */
static int abort_after_peer_closed(struct side *s)
{
	struct abort_pair p = { .s = *s, .ctx = s->ctx };
	void *reqs[2 * ABORT_MSGS] = { 0 };
	int rc = 0;

	snprintf(p.name, sizeof(p.name), "closed");
	if (pair_open(&p))
		return pair_abort(&p, reqs, 0), -1;
	if (s->role == 'a') {
		double settle = now_s() + ABORT_SETTLE_S;

		rc = post_recvs(&p, reqs, true);
		/* NCCL's proxy tests its requests until the abort, which is what moves a
		 * provider's deferred sends (the announcements) out */
		while (!rc && now_s() < settle) {
			for (int i = 0; i < ABORT_MSGS; i++) {
				int done = 0, size = 0;

				if (reqs[i] &&
				    s->api->test(s->api, reqs[i], &done, &size) == ncclSuccess &&
				    done)
					reqs[i] = NULL;
			}
			idle_wait();
		}
		rc |= pair_abort(&p, reqs, ABORT_MSGS);
		rc |= rdv_put(s, "closed.a-done", "1", 1);
		return rc ? -1 : 0;
	}
	/* b's proxy goes on with its other work meanwhile (here: receives from a, which a
	 * never sends): the calls move b's endpoint, as a provider may need the receiving
	 * side's progress to take a's announcements in (tcp;ofi_rxm accepts its connection). */
	if (post_recvs(&p, reqs, false))
		return pair_abort(&p, reqs, ABORT_MSGS), -1;
	{
		double until = now_s() + CONF_RDV_TIMEOUT_S;
		char flag;

		while (!rdv_peek(s, "closed.a-done", &flag, 1)) {
			if (now_s() > until || rdv_peer_aborted(s))
				return conf_fail(s, "a never closed"),
				       pair_abort(&p, reqs, ABORT_MSGS), -1;
			for (int i = 0; i < ABORT_MSGS; i++) {
				int done = 0, size = 0;

				if (reqs[i])
					(void)s->api->test(s->api, reqs[i], &done, &size);
			}
			idle_wait();
		}
	}
	rc = post_sends(&p, reqs + ABORT_MSGS, true, ABORT_ISEND_BOUND_S);
	for (int i = 0; i < ABORT_MSGS && !rc; i++) {
		double until = now_s() + CONF_ERROR_BOUND_S;
		int done = 0, size = 0;
		ncclResult_t r;

		conf_step(s, "closed: test(send %d) until it ends", i);
		do {
			r = s->api->test(s->api, reqs[ABORT_MSGS + i], &done, &size);
			if (!done && r == ncclSuccess)
				idle_wait();
		} while (!done && r == ncclSuccess && now_s() < until);
		if (!done && r == ncclSuccess)
			rc = conf_fail(s,
				       "send %d to a closed peer neither completed nor failed "
				       "within %.0f s",
				       i, CONF_ERROR_BOUND_S);
		else
			conf_log(s, "closed: send %d %s", i,
				 r == ncclSuccess ? "completed" : netapi_result_str(r));
		reqs[ABORT_MSGS + i] = NULL; /* ended: NCCL tests it no more */
	}
	rc |= pair_abort(&p, reqs, 2 * ABORT_MSGS);
	return rc ? -1 : 0;
}

int sc_abort_close(struct side *s)
{
	struct abort_pair t[ABORT_THREADS];
	pthread_t th[ABORT_THREADS];
	int rc = 0;

	if (abort_after_peer_closed(s))
		return -1;
	/* one thread, then four at once, each with its own comms */
	for (int nthreads = 1; nthreads <= ABORT_THREADS; nthreads += ABORT_THREADS - 1) {
		for (int i = 0; i < nthreads; i++) {
			t[i] = (struct abort_pair){ .s = *s, .ctx = s->ctx };
			snprintf(t[i].base, sizeof(t[i].base), "n%d.t%d", nthreads, i);
			if (pthread_create(&th[i], NULL, abort_rounds, &t[i])) {
				for (int j = 0; j < i; j++)
					pthread_join(th[j], NULL);
				return conf_fail(s, "pthread_create");
			}
		}
		for (int i = 0; i < nthreads; i++) {
			pthread_join(th[i], NULL);
			rc |= t[i].rc_out;
		}
		if (rc)
			return -1;
	}
	return 0;
}
