// SPDX-License-Identifier: Apache-2.0
/*
 * Rings of 2, 3 and 4 ranks, one process each, the way NCCL's ring algorithms use the
 * net: every rank holds a send comm to the next rank and a receive comm from the previous
 * one, on the same device. Each iteration posts the receive, then calls isend until it is
 * taken (NCCL's proxy retries a NULL request the same way) without testing the receive in
 * between, then tests both. A plugin whose progress only moves the comm being called
 * deadlocks here: a rank spinning in isend must still push out what its receive comm owes
 * the previous rank (over shm, whose first send to a new peer answers -FI_EAGAIN).
 * Side a runs the even ranks and side b the odd ones, so that in netns.sh the ring
 * crosses the namespaces.
 */
#include "tests/conformance/conf.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/pattern.h"

#define RING_ITERS 1000
#define RING_MAX (64 << 10)
#define RING_STUCK_S 10.0 /* an isend not taken for this long: the ring is deadlocked */
#define RING_RANK_ALARM_S 120

static char role_of(int rank)
{
	return rank % 2 ? 'b' : 'a';
}

static size_t msg_size(uint64_t seed, int nranks, int rank, int iter)
{
	uint64_t st = seed ^ ((uint64_t)nranks << 40) ^ ((uint64_t)rank << 32) ^ (uint64_t)iter;

	prng_next(&st);
	return prng_range(&st, 0, 7) == 0 ? 0 : prng_range(&st, 1, RING_MAX);
}

static uint64_t msg_id(int rank, int iter)
{
	return (uint64_t)rank * 10000000ULL + (uint64_t)iter;
}

/* Poll connect to the next rank and accept from the previous one in turn: in a ring
 * each depends on another rank doing the same. */
static int ring_link(struct side *s, int nranks, int rank, void **lc, void **sc, void **rc)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], next[NCCL_NET_HANDLE_MAXSIZE], name[32];
	int nxt = (rank + 1) % nranks;
	double t0;
	ncclResult_t r;

	memset(mine, 0, sizeof(mine));
	r = s->api->listen(s->api, s->ctx, s->dev, mine, lc);
	if (r != ncclSuccess || !*lc)
		return conf_fail(s, "listen returned %s (%d)", netapi_result_str(r), r);
	snprintf(name, sizeof(name), "r%d.h%d", nranks, rank);
	if (rdv_put(s, name, mine, sizeof(mine)))
		return -1;
	snprintf(name, sizeof(name), "r%d.h%d", nranks, nxt);
	if (rdv_get_from(s, role_of(nxt), name, next, sizeof(next), CONF_RDV_TIMEOUT_S))
		return -1;
	conf_step(s, "ring of %d, rank %d: connect to %d, accept from %d", nranks, rank, nxt,
		  (rank + nranks - 1) % nranks);
	t0 = now_s();
	while (!*sc || !*rc) {
		if (!*sc && (r = s->api->connect(s->api, s->ctx, s->dev, next, sc)) != ncclSuccess)
			return conf_fail(s, "connect returned %s (%d)", netapi_result_str(r), r);
		if (!*rc && (r = s->api->accept(s->api, *lc, rc)) != ncclSuccess)
			return conf_fail(s, "accept returned %s (%d)", netapi_result_str(r), r);
		if (now_s() - t0 > CONF_CONNECT_TIMEOUT_S)
			return conf_fail(s, "ring not connected after %.0f s",
					 CONF_CONNECT_TIMEOUT_S);
		idle_wait();
	}
	return 0;
}

static int ring_iter(struct side *s, int nranks, int rank, int iter, void *sc, void *rc, char *sbuf,
		     void *smh, char *rbuf, void *rmh)
{
	int prev = (rank + nranks - 1) % nranks;
	size_t ssize = msg_size(s->seed, nranks, rank, iter);
	size_t rsize = msg_size(s->seed, nranks, prev, iter);
	size_t cap = RING_MAX;
	void *sreq = NULL, *rreq = NULL, *data = rbuf;
	int sdone = 0, rdone = 0, got = -1, tag = prev, sz;
	double t0 = now_s();
	ncclResult_t r;
	size_t bad;

	pattern_fill(sbuf, ssize, s->seed, msg_id(rank, iter));
	while (!rreq) {
		r = s->api->irecv(s->api, rc, 1, &data, &cap, &tag, &rmh, &rreq);
		if (r != ncclSuccess)
			return conf_fail(s, "iteration %d: irecv returned %s (%d)", iter,
					 netapi_result_str(r), r);
		if (!rreq && now_s() - t0 > RING_STUCK_S)
			return conf_fail(s, "iteration %d: irecv not taken for %.0f s", iter,
					 RING_STUCK_S);
		if (!rreq)
			idle_wait();
	}
	/* isend until taken, the receive left alone meanwhile */
	while (!sreq) {
		r = s->api->isend(s->api, sc, sbuf, ssize, rank, smh, &sreq);
		if (r != ncclSuccess)
			return conf_fail(s, "iteration %d: isend returned %s (%d)", iter,
					 netapi_result_str(r), r);
		if (!sreq && now_s() - t0 > RING_STUCK_S)
			return conf_fail(s,
					 "iteration %d: isend still not taken after %.0f s: the "
					 "ring is deadlocked (progress must move every comm of the "
					 "device, not only the one called)",
					 iter, RING_STUCK_S);
		if (!sreq)
			idle_wait();
	}
	while (!sdone || !rdone) {
		if (!sdone && (r = s->api->test(s->api, sreq, &sdone, &sz)) != ncclSuccess)
			return conf_fail(s, "iteration %d: test(isend) returned %s (%d)", iter,
					 netapi_result_str(r), r);
		if (!rdone && (r = s->api->test(s->api, rreq, &rdone, &got)) != ncclSuccess)
			return conf_fail(s, "iteration %d: test(irecv) returned %s (%d)", iter,
					 netapi_result_str(r), r);
		if (now_s() - t0 > CONF_XFER_TIMEOUT_S)
			return conf_fail(s, "iteration %d: not done (send %d, receive %d)", iter,
					 sdone, rdone);
		if (!sdone || !rdone)
			idle_wait();
	}
	if (got != (int)rsize)
		return conf_fail(s, "iteration %d: received %d bytes from rank %d, it sent %zu",
				 iter, got, prev, rsize);
	bad = pattern_check(rbuf, rsize, s->seed, msg_id(prev, iter));
	if (bad != (size_t)-1)
		return conf_fail(s, "iteration %d: byte %zu from rank %d is wrong", iter, bad,
				 prev);
	return 0;
}

static int ring_rank(struct side *s, int nranks, int rank)
{
	void *lc = NULL, *sc = NULL, *rc = NULL, *smh = NULL, *rmh = NULL;
	char *sbuf = malloc(RING_MAX), *rbuf = malloc(RING_MAX), name[32];
	ncclResult_t r;
	int ret = -1;

	alarm(RING_RANK_ALARM_S);
	snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "%c.%s.rank%d", s->role, s->key,
		 rank);
	if (!sbuf || !rbuf)
		return conf_fail(s, "malloc");
	r = s->api->init(s->api, &s->ctx, s->seed + (uint64_t)rank);
	if (r != ncclSuccess)
		return conf_fail(s, "init returned %s (%d)", netapi_result_str(r), r);
	if (ring_link(s, nranks, rank, &lc, &sc, &rc))
		goto out;
	if ((r = s->api->reg_mr(s->api, sc, sbuf, RING_MAX, &smh)) != ncclSuccess ||
	    (r = s->api->reg_mr(s->api, rc, rbuf, RING_MAX, &rmh)) != ncclSuccess) {
		conf_fail(s, "regMr returned %s (%d)", netapi_result_str(r), r);
		goto out;
	}
	conf_step(s, "ring of %d, rank %d: %d iterations", nranks, rank, RING_ITERS);
	for (int it = 0; it < RING_ITERS; it++)
		if (ring_iter(s, nranks, rank, it, sc, rc, sbuf, smh, rbuf, rmh))
			goto out;
	/* everyone done before anyone closes */
	snprintf(name, sizeof(name), "r%d.done%d", nranks, rank);
	if (rdv_put(s, name, "", 0))
		goto out;
	for (int k = 0; k < nranks; k++) {
		snprintf(name, sizeof(name), "r%d.done%d", nranks, k);
		if (rdv_get_from(s, role_of(k), name, NULL, 0, CONF_RDV_TIMEOUT_S))
			goto out;
	}
	conf_log(s, "ring of %d, rank %d: %d iterations verified", nranks, rank, RING_ITERS);
	ret = 0;
out:
	if (smh)
		s->api->dereg_mr(s->api, sc, smh);
	if (rmh)
		s->api->dereg_mr(s->api, rc, rmh);
	if (close_comms(s, sc, rc, lc))
		ret = -1;
	if ((r = s->api->finalize(s->api, s->ctx)) != ncclSuccess)
		ret = conf_fail(s, "finalize returned %s (%d)", netapi_result_str(r), r);
	free(sbuf);
	free(rbuf);
	return ret;
}

int sc_ring(struct side *s)
{
	int failures = 0;

	for (int nranks = 2; nranks <= 4; nranks++) {
		pid_t pid[4];
		int nkids = 0;

		for (int rank = s->role == 'a' ? 0 : 1; rank < nranks; rank += 2) {
			fflush(NULL);
			pid[nkids] = fork();
			if (pid[nkids] < 0) {
				conf_fail(s, "fork");
				failures++;
				break;
			}
			if (pid[nkids] == 0) {
				struct side rs = *s;

				_exit(ring_rank(&rs, nranks, rank) ? 1 : 0);
			}
			nkids++;
		}
		for (int k = 0; k < nkids; k++) {
			double deadline = now_s() + RING_RANK_ALARM_S + 10;
			int status = 0;
			pid_t w;

			while ((w = waitpid(pid[k], &status, WNOHANG)) == 0 && now_s() < deadline)
				idle_wait();
			if (w != pid[k]) {
				kill(pid[k], SIGKILL);
				waitpid(pid[k], &status, 0);
			}
			if (!WIFEXITED(status) || WEXITSTATUS(status)) {
				conf_fail(s, "ring of %d: a rank of side %c failed", nranks,
					  s->role);
				failures++;
			}
		}
		if (failures) {
			rdv_abort(s);
			break;
		}
	}
	return failures ? -1 : 0;
}
