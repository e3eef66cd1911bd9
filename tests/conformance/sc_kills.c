// SPDX-License-Identifier: Apache-2.0
/*
 * A kill at any step (issue 13). Side b, the victim, SIGKILLs itself at a moment drawn
 * from the seed within one step: connect, accept, a transfer, a grouped receive, an
 * iflush, or close. Side a, the survivor, has comms with b both ways and, all along,
 * comms both ways with a bystander process c (forked by a, before init). Just before
 * dying, b publishes the moment (conf_die). Then:
 *   - every request a has pending with b ends (an error, or a verified completion) and
 *     every new one fails, within 2 x BRAID_LIVENESS_MS of the kill (+ 1 s of slack for
 *     a loaded machine, as kill-sender/kill-receiver allow); connect/accept in progress
 *     fail or stay pending, never crash;
 *   - a closes its comms with b without error;
 *   - a and c then move a verified stream each way: the other comms are untouched.
 * CONF_KILL_STEP (0..5) forces the step; the seed draws it otherwise.
 */
#include "tests/conformance/conf.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/pattern.h"

enum kill_step { K_CONNECT, K_ACCEPT, K_SEND, K_GROUPS, K_FLUSH, K_CLOSE, K_NSTEPS };
static const char *const step_name[K_NSTEPS] = { "connect",         "accept", "transfer",
						 "grouped receive", "iflush", "close" };

static double bound_after_kill_s(void)
{
	const char *v = getenv("BRAID_LIVENESS_MS");
	int ms = v && atoi(v) > 0 ? atoi(v) : 100; /* plugin/params.h default */

	return 2.0 * ms / 1000.0 + 1.0;
}

/* ---- the bystander, c: comms both ways with a, data after the kill ---- */

/*
 * libfabric's shm provider completes an endpoint's sends in the order of its response
 * queue (smr_progress_resp stops at the first busy entry), and a send to a peer that
 * died mid-transfer stays busy for ever: every later send of the survivor's endpoint,
 * to anyone, then never completes. braid has one endpoint per device, so on shm the
 * survivor's sends to the bystander cannot complete after some kills; its receives
 * from the bystander still can. braid says so in a WARN when such a peer dies.
 * docs/reliability.md ("Kills at every step").
 */
static bool shm_sends_blocked_after_kill(void)
{
	const char *be = getenv("BRAID_BACKEND"), *prov = getenv("BRAID_OFI_PROVIDER");

	return be && !strcmp(be, "ofi") && prov && !strcmp(prov, "shm");
}

static int bystander(struct side *s)
{
	void *lc = NULL, *rc = NULL, *sc = NULL;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct xfer_plan p;
	struct xfer x;
	ncclResult_t r;
	int ret = -1;

	memset(&x, 0, sizeof(x));
	r = s->api->init(s->api, &s->ctx, s->seed);
	if (r != ncclSuccess)
		return conf_fail(s, "init returned %s (%d)", netapi_result_str(r), r);
	/* c -> a */
	if (rdv_get_from(s, 'a', "by-ca", handle, sizeof(handle), CONF_RDV_TIMEOUT_S) ||
	    link_poll_connect(s, handle, &sc, &r, CONF_CONNECT_TIMEOUT_S)) {
		conf_fail(s, "connect to a");
		goto out;
	}
	/* a -> c */
	memset(handle, 0, sizeof(handle));
	r = s->api->listen(s->api, s->ctx, s->dev, handle, &lc);
	if (r != ncclSuccess || rdv_put(s, "by-ac", handle, sizeof(handle)) ||
	    link_poll_accept(s, lc, &rc, &r, CONF_CONNECT_TIMEOUT_S)) {
		conf_fail(s, "accept from a");
		goto out;
	}
	if (rdv_put(s, "by-ready", "", 0) ||
	    rdv_get_from(s, 'a', "verdict", NULL, 0, CONF_XFER_TIMEOUT_S))
		goto out;
	conf_step(s, "bystander: stream to a, then from a");
	plan_stream(&p, s->seed ^ 0xc0ffee, 30, 1 << 20, false);
	ret = xfer_run(&x, s, sc, &p, true) ? -1 : 0;
	xfer_dereg(&x);
	xfer_free(&x);
	plan_free(&p);
	if (!ret && !shm_sends_blocked_after_kill()) {
		plan_stream(&p, s->seed ^ 0xbeef, 30, 1 << 20, false);
		ret = xfer_run(&x, s, rc, &p, false) ? -1 : 0;
		xfer_dereg(&x);
		xfer_free(&x);
		plan_free(&p);
	}
	if (!ret && (rdv_put(s, "by-done", "", 0) ||
		     rdv_get_from(s, 'a', "by-done", NULL, 0, CONF_RDV_TIMEOUT_S)))
		ret = -1;
out:
	if (close_comms(s, sc, rc, lc))
		ret = -1;
	s->api->finalize(s->api, s->ctx);
	return ret;
}

/* a's side of the bystander's comms */
static int by_open(struct side *s, void **lc, void **rc, void **sc)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	ncclResult_t r;

	memset(handle, 0, sizeof(handle));
	r = s->api->listen(s->api, s->ctx, s->dev, handle, lc);
	if (r != ncclSuccess || rdv_put(s, "by-ca", handle, sizeof(handle)) ||
	    link_poll_accept(s, *lc, rc, &r, CONF_CONNECT_TIMEOUT_S))
		return conf_fail(s, "accept from the bystander");
	if (rdv_get_from(s, 'c', "by-ac", handle, sizeof(handle), CONF_RDV_TIMEOUT_S) ||
	    link_poll_connect(s, handle, sc, &r, CONF_CONNECT_TIMEOUT_S))
		return conf_fail(s, "connect to the bystander");
	return rdv_get_from(s, 'c', "by-ready", NULL, 0, CONF_RDV_TIMEOUT_S);
}

static int by_traffic(struct side *s, void *rc, void *sc)
{
	struct xfer_plan p;
	struct xfer x;
	int ret;

	conf_step(s, "the bystander's comms after the kill");
	plan_stream(&p, s->seed ^ 0xc0ffee, 30, 1 << 20, false);
	ret = xfer_run(&x, s, rc, &p, false) ? -1 : 0;
	xfer_dereg(&x);
	xfer_free(&x);
	plan_free(&p);
	if (!ret && !shm_sends_blocked_after_kill()) {
		plan_stream(&p, s->seed ^ 0xbeef, 30, 1 << 20, false);
		ret = xfer_run(&x, s, sc, &p, true) ? -1 : 0;
		xfer_dereg(&x);
		xfer_free(&x);
		plan_free(&p);
		if (!ret)
			conf_log(s, "bystander comms: 30 messages each way after the kill, "
				    "verified");
	} else if (!ret) {
		conf_log(s, "bystander comms: 30 messages from c after the kill, verified; none "
			    "to c: libfabric shm blocks a survivor's sends behind one to a dead "
			    "peer (docs/reliability.md)");
	}
	if (!ret && (rdv_put(s, "by-done", "", 0) ||
		     rdv_get_from(s, 'c', "by-done", NULL, 0, CONF_RDV_TIMEOUT_S)))
		ret = -1;
	return ret;
}

/* ---- the survivor's checks ---- */

/* When did b die? Waits (bounded) for its announcement. */
static int kill_time(struct side *s, double *t)
{
	return rdv_get(s, "killed", t, sizeof(*t), CONF_ERROR_BOUND_S);
}

static int check_bound(struct side *s, const char *what, double at)
{
	double kt, bound = bound_after_kill_s();

	if (kill_time(s, &kt))
		return -1;
	conf_log(s, "%s ended %.3f s after the kill (bound %.1f s)", what, at - kt, bound);
	if (at - kt > bound)
		return conf_fail(s, "%s ended %.2f s after the kill, past %.1f s", what, at - kt,
				 bound);
	return 0;
}

/* A request on a comm to the dead peer, made after the kill: it must fail in bound. */
static int new_request_fails(struct side *s, void *comm, bool send)
{
	static char buf[4096];
	double t0 = now_s();
	void *mh = NULL, *req = NULL;
	ncclResult_t r;
	int ret = -1;

	r = s->api->reg_mr(s->api, comm, buf, sizeof(buf), &mh);
	if (r != ncclSuccess) /* refusing even the registration is a clear error too */
		return check_bound(s, send ? "regMr on the send comm" : "regMr on the recv comm",
				   now_s());
	while (now_s() - t0 < CONF_ERROR_BOUND_S) {
		int done = 0, sizes[XFER_MAX_GROUP];

		if (!req) {
			void *data = buf;
			size_t size = sizeof(buf);
			int tag = 3;

			r = send ? s->api->isend(s->api, comm, buf, size, tag, mh, &req)
				 : s->api->irecv(s->api, comm, 1, &data, &size, &tag, &mh, &req);
		} else {
			r = s->api->test(s->api, req, &done, sizes);
		}
		if (r != ncclSuccess) {
			ret = check_bound(s, send ? "a new isend" : "a new irecv", now_s());
			break;
		}
		if (done) {
			conf_fail(s, "a %s on a comm to a dead peer completed",
				  send ? "send" : "receive");
			break;
		}
		idle_wait();
	}
	if (ret && now_s() - t0 >= CONF_ERROR_BOUND_S)
		conf_fail(s, "a new %s to the dead peer did not fail in %.0f s",
			  send ? "isend" : "irecv", CONF_ERROR_BOUND_S);
	s->api->dereg_mr(s->api, comm, mh);
	return ret;
}

/* connect or accept towards b while b dies: error, or pending until past the bound; a comm
 * that comes out anyway must fail its first request. */
static int survive_setup(struct side *s, bool accepting, void *lc, const char *handle, void **comm)
{
	double kt = 0;
	ncclResult_t r = ncclSuccess;
	char h[NCCL_NET_HANDLE_MAXSIZE];

	if (handle)
		memcpy(h, handle, sizeof(h));
	for (;;) {
		if (!*comm)
			r = accepting ? s->api->accept(s->api, lc, comm)
				      : s->api->connect(s->api, s->ctx, s->dev, h, comm);
		if (r != ncclSuccess) {
			conf_log(s, "%s failed: %s", accepting ? "accept" : "connect",
				 netapi_result_str(r));
			return kt || !kill_time(s, &kt) ? 0 : -1;
		}
		if (*comm)
			return new_request_fails(s, *comm, !accepting);
		if (!kt)
			rdv_peek(s, "killed", &kt, sizeof(kt));
		if (kt && now_s() - kt > bound_after_kill_s()) {
			conf_log(s, "%s still pending %.1f s after the kill: nobody came, fine",
				 accepting ? "accept" : "connect", now_s() - kt);
			return 0;
		}
		if (!kt && rdv_peer_aborted(s))
			return conf_fail(s, "peer gave up");
		idle_wait();
	}
}

static void plan_for(struct xfer_plan *p, enum kill_step k, uint64_t seed, int max_recvs)
{
	if (k == K_SEND)
		plan_stream(p, seed, 300, 1 << 20, false);
	else
		plan_groups(p, seed, 200, max_recvs, 256 << 10);
	p->flush_pct = k == K_FLUSH ? 100 : 0;
}

int sc_kill_any(struct side *s)
{
	bool victim = s->role == 'b';
	uint64_t st = s->seed;
	const char *force = getenv("CONF_KILL_STEP");
	enum kill_step k = force ? (enum kill_step)(atoi(force) % K_NSTEPS)
				 : (enum kill_step)prng_range(&st, 0, K_NSTEPS - 1);
	int polls = (int)prng_range(&st, 0, 3), after = (int)prng_range(&st, 1, 60);
	void *lc = NULL, *rc = NULL, *sc = NULL, *blc = NULL, *brc = NULL, *bsc = NULL;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	pid_t by = -1;
	struct xfer_plan p = { 0 };
	struct xfer x;
	ncclResult_t r;
	int ret = -1, status;

	memset(&x, 0, sizeof(x));
	if (!victim) {
		fflush(NULL);
		by = fork();
		if (by == 0) {
			struct side c = *s;

			c.role = 'c';
			_exit(bystander(&c) ? 1 : 0);
		}
		if (by < 0)
			return conf_fail(s, "fork (bystander)");
	}
	r = s->api->init(s->api, &s->ctx, s->seed);
	if (r != ncclSuccess) {
		conf_fail(s, "init returned %s (%d)", netapi_result_str(r), r);
		goto out;
	}
	r = s->api->get_props(s->api, s->dev, &s->props);
	if (r != ncclSuccess) {
		conf_fail(s, "getProperties returned %s", netapi_result_str(r));
		goto out;
	}
	conf_log(s, "kill at: %s (polls %d, after %d)", step_name[k], polls, after);
	if (!victim && by_open(s, &blc, &brc, &bsc))
		goto out;

	/* b -> a: a listens, b connects */
	if (!victim) {
		memset(handle, 0, sizeof(handle));
		r = s->api->listen(s->api, s->ctx, s->dev, handle, &lc);
		if (r != ncclSuccess || rdv_put(s, "ab", handle, sizeof(handle)))
			goto out;
		if (k == K_CONNECT) {
			ret = survive_setup(s, true, lc, NULL, &rc);
			goto verdict;
		}
		if (link_poll_accept(s, lc, &rc, &r, CONF_CONNECT_TIMEOUT_S)) {
			conf_fail(s, "accept from b");
			goto out;
		}
	} else {
		if (rdv_get(s, "ab", handle, sizeof(handle), CONF_RDV_TIMEOUT_S))
			goto out;
		if (k == K_CONNECT) {
			for (int i = 0; i < polls && !sc; i++) {
				r = s->api->connect(s->api, s->ctx, s->dev, handle, &sc);
				if (r != ncclSuccess)
					break;
			}
			conf_die(s, "during connect");
		}
		if (link_poll_connect(s, handle, &sc, &r, CONF_CONNECT_TIMEOUT_S))
			goto out;
	}
	/* a -> b: b listens, a connects */
	if (victim) {
		memset(handle, 0, sizeof(handle));
		r = s->api->listen(s->api, s->ctx, s->dev, handle, &lc);
		if (r != ncclSuccess || rdv_put(s, "ba", handle, sizeof(handle)))
			goto out;
		if (k == K_ACCEPT) {
			for (int i = 0; i < polls * 50 && !rc; i++) {
				r = s->api->accept(s->api, lc, &rc);
				if (r != ncclSuccess)
					break;
				idle_wait();
			}
			conf_die(s, "during accept");
		}
		if (link_poll_accept(s, lc, &rc, &r, CONF_CONNECT_TIMEOUT_S))
			goto out;
	} else {
		if (rdv_get(s, "ba", handle, sizeof(handle), CONF_RDV_TIMEOUT_S))
			goto out;
		if (k == K_ACCEPT) {
			ret = survive_setup(s, false, NULL, handle, &sc);
			goto verdict;
		}
		if (link_poll_connect(s, handle, &sc, &r, CONF_CONNECT_TIMEOUT_S)) {
			conf_fail(s, "connect to b");
			goto out;
		}
	}

	if (k == K_CLOSE) {
		if (victim) {
			if (rdv_sync(s, "both-open"))
				goto out;
			/* a's requests are posted by now, or will be on a closed comm */
			if (polls & 1)
				s->api->close_send(s->api, sc);
			if (polls & 2)
				s->api->close_recv(s->api, rc);
			conf_die(s, "while closing");
		}
		if (rdv_sync(s, "both-open"))
			goto out;
		ret = new_request_fails(s, rc, false) | new_request_fails(s, sc, true);
		goto verdict;
	}

	/* a transfer, a grouped receive or an iflush: K_SEND b sends to a; else a to b */
	plan_for(&p, k, s->seed ^ 0x5eed, s->props.max_recvs);
	{
		bool a_sends = k != K_SEND, sending = victim != a_sends;
		void *comm = a_sends ? (victim ? rc : sc) : (victim ? sc : rc);

		if (victim) {
			if (k == K_FLUSH)
				p.kill_in_flush = after % 20 + 1;
			else
				p.kill_after = k == K_SEND ? after : after % 30 + 1;
			xfer_run(&x, s, comm, &p, sending);
			conf_die(s, "after its plan (the kill point was not reached)");
		}
		p.expect_error = true;
		ret = -1;
		if (xfer_run(&x, s, comm, &p, sending) == 1) {
			double last;

			conf_log(s, "first error: %s: %s", x.err_call, netapi_result_str(x.err_rc));
			ret = xfer_drain(&x, bound_after_kill_s(), &last) ||
					      check_bound(s, "the last pending request", last)
				      ? -1
				      : 0;
		}
		/* the other comm with b: a new request fails too */
		if (!ret)
			ret = new_request_fails(s, a_sends ? rc : sc, !a_sends);
		xfer_dereg(&x);
	}

verdict:
	if (!victim) {
		conf_log(s, "survivor: %s", ret ? "FAILED" : "every request with b ended in bound");
		if (close_comms(s, sc, rc, lc))
			ret = -1;
		sc = rc = lc = NULL;
		if (rdv_put(s, "verdict", "", 0) || by_traffic(s, brc, bsc))
			ret = -1;
	}
out:
	xfer_free(&x);
	plan_free(&p);
	if (victim) /* every path of the victim ends by SIGKILL */
		conf_die(s, "at the end (a step failed)");
	if (close_comms(s, sc, rc, lc) || close_comms(s, bsc, brc, blc))
		ret = -1;
	if (s->ctx)
		s->api->finalize(s->api, s->ctx);
	if (by > 0) {
		double t0 = now_s();
		pid_t w;

		while ((w = waitpid(by, &status, WNOHANG)) == 0 && now_s() - t0 < 60)
			idle_wait();
		if (w != by) {
			kill(by, SIGKILL);
			waitpid(by, &status, 0);
			ret = conf_fail(s, "the bystander did not finish within 60 s");
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			ret = conf_fail(s, "the bystander failed");
		}
	}
	return ret;
}
