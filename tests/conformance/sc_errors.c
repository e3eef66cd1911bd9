// SPDX-License-Identifier: Apache-2.0
/*
 * Scenarios where something goes wrong: bad handles, a peer killed mid-transfer, a
 * receive buffer smaller than the message. The plugin must report an error within a
 * bounded time, never crash, never hang, and let the survivor close its comms.
 */
#include "tests/conformance/conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/pattern.h"

#define BAD_HANDLE_BOUND_S 5.0

static double liveness_s(void)
{
	const char *v = getenv("BRAID_LIVENESS_MS");

	return (v && atoi(v) > 0 ? atoi(v) : 100) / 1000.0;
}

/* connect() on a bad handle must fail with ncclInvalidArgument, quickly. */
static int try_bad_handle(struct side *s, const char *what, const unsigned char *handle)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	double start = now_s();
	void *sc = NULL;
	ncclResult_t r;
	int polls = 0;

	conf_step(s, "connect(%s handle)", what);
	/* One buffer for all calls, as NCCL: the plugin may keep its progress in it. */
	memcpy(h, handle, sizeof(h));
	for (;;) {
		r = s->api->connect(s->api, s->ctx, s->dev, h, &sc);
		polls++;
		if (r != ncclSuccess || sc || now_s() - start > BAD_HANDLE_BOUND_S)
			break;
		idle_wait();
	}
	if (sc) {
		close_comms(s, sc, NULL, NULL);
		return conf_fail(s, "connect succeeded (comm %p) on a %s handle", sc, what);
	}
	if (r == ncclSuccess)
		return conf_fail(s,
				 "connect still pending after %.0f s (%d polls) on a %s handle;"
				 " expected ncclInvalidArgument quickly",
				 BAD_HANDLE_BOUND_S, polls, what);
	if (r != ncclInvalidArgument)
		return conf_fail(s,
				 "connect on a %s handle returned %s (%d) after %.2f s; "
				 "expected ncclInvalidArgument (4)",
				 what, netapi_result_str(r), r, now_s() - start);
	conf_log(s, "%s handle: ncclInvalidArgument after %.3f s, %d polls", what, now_s() - start,
		 polls);
	return 0;
}

/* Connect and accept polled in turn from one thread: neither may wait for the other. */
static int self_connect(struct side *s, const unsigned char *handle, void *lc)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	double deadline = now_s() + CONF_CONNECT_TIMEOUT_S;
	void *sc = NULL, *rc = NULL;
	ncclResult_t r;
	int ret = -1;

	memcpy(h, handle, sizeof(h));
	conf_step(s, "connect and accept to myself, polled in turn");
	while (!sc || !rc) {
		if (!sc && (r = s->api->connect(s->api, s->ctx, s->dev, h, &sc)) != ncclSuccess)
			return conf_fail(s, "connect returned %s (%d)", netapi_result_str(r), r);
		if (!rc && (r = s->api->accept(s->api, lc, &rc)) != ncclSuccess) {
			close_comms(s, sc, NULL, NULL);
			return conf_fail(s, "accept returned %s (%d)", netapi_result_str(r), r);
		}
		if (now_s() > deadline) {
			close_comms(s, sc, rc, NULL);
			return conf_fail(s, "connect/accept to myself not ready after %.0f s",
					 CONF_CONNECT_TIMEOUT_S);
		}
		idle_wait();
	}
	/* One message through it; both ends live in this thread, so each call must
	 * return without waiting for the other end. */
	{
		static unsigned char sbuf[1000], rbuf[1000];
		void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
		int sdone = 0, rdone = 0, size = -1, ssize = -1;
		size_t rsz = sizeof(rbuf);
		int tag = 7;
		void *data = rbuf;

		pattern_fill(sbuf, sizeof(sbuf), s->seed, 42);
		memset(rbuf, 0, sizeof(rbuf));
		if (s->api->reg_mr(s->api, sc, sbuf, sizeof(sbuf), &smh) ||
		    s->api->reg_mr(s->api, rc, rbuf, sizeof(rbuf), &rmh)) {
			conf_fail(s, "regMr on the self-connected comms failed");
			goto close;
		}
		conf_step(s, "isend/irecv of 1000 bytes to myself");
		deadline = now_s() + CONF_CONNECT_TIMEOUT_S;
		while (!sdone || !rdone) {
			if (!rreq && (r = s->api->irecv(s->api, rc, 1, &data, &rsz, &tag, &rmh,
							&rreq)) != ncclSuccess) {
				conf_fail(s, "irecv returned %s (%d)", netapi_result_str(r), r);
				goto dereg;
			}
			if (!sreq && (r = s->api->isend(s->api, sc, sbuf, sizeof(sbuf), tag, smh,
							&sreq)) != ncclSuccess) {
				conf_fail(s, "isend returned %s (%d)", netapi_result_str(r), r);
				goto dereg;
			}
			if (sreq && !sdone &&
			    (r = s->api->test(s->api, sreq, &sdone, &ssize)) != ncclSuccess) {
				conf_fail(s, "test(send) returned %s (%d)", netapi_result_str(r),
					  r);
				goto dereg;
			}
			if (rreq && !rdone &&
			    (r = s->api->test(s->api, rreq, &rdone, &size)) != ncclSuccess) {
				conf_fail(s, "test(recv) returned %s (%d)", netapi_result_str(r),
					  r);
				goto dereg;
			}
			if (now_s() > deadline) {
				conf_fail(s, "not done after %.0f s (send %d, recv %d)",
					  CONF_CONNECT_TIMEOUT_S, sdone, rdone);
				goto dereg;
			}
			idle_wait();
		}
		size_t bad = pattern_check(rbuf, sizeof(rbuf), s->seed, 42);

		if (size != (int)sizeof(rbuf))
			conf_fail(s, "received size %d, sent %zu", size, sizeof(rbuf));
		else if (bad != (size_t)-1)
			conf_fail(s, "byte %zu of the message to myself is wrong", bad);
		else
			ret = 0;
dereg:
		/* requests still pending (after an error) die with their comms */
		if (smh)
			s->api->dereg_mr(s->api, sc, smh);
		if (rmh)
			s->api->dereg_mr(s->api, rc, rmh);
	}
close:
	if (close_comms(s, sc, rc, NULL))
		ret = -1;
	return ret;
}

int sc_bad_handle(struct side *s)
{
	unsigned char good[NCCL_NET_HANDLE_MAXSIZE], bad[NCCL_NET_HANDLE_MAXSIZE];
	static const int keep[] = { 0, 2, 4, 8, 16, 24, 32, 48, 64, 96 };
	uint64_t st = s->seed;
	int used;
	void *lc = NULL;
	ncclResult_t r;
	int rc = 0;

	memset(good, 0, sizeof(good));
	conf_step(s, "listen(dev %d) for a valid handle", s->dev);
	r = s->api->listen(s->api, s->ctx, s->dev, good, &lc);
	if (r != ncclSuccess || !lc)
		return conf_fail(s, "listen returned %s (%d)", netapi_result_str(r), r);
	for (int k = 0; k < 4; k++) {
		char what[64];

		for (size_t i = 0; i < sizeof(bad); i++)
			bad[i] = (unsigned char)prng_next(&st);
		snprintf(what, sizeof(what), "random garbage #%d", k);
		rc |= try_bad_handle(s, what, bad);
	}
	memset(bad, 0xff, sizeof(bad));
	rc |= try_bad_handle(s, "all-0xff", bad);
	/* Truncated: the first bytes of a valid handle, the rest lost (zero). Only cuts
	 * inside the bytes the plugin uses make a bad handle. */
	for (used = sizeof(good); used > 0 && !good[used - 1]; used--)
		;
	conf_log(s, "the plugin's handle uses %d of %d bytes", used, (int)sizeof(good));
	for (size_t i = 0; i <= sizeof(keep) / sizeof(keep[0]); i++) {
		int k = i < sizeof(keep) / sizeof(keep[0]) ? keep[i] : used - 1;
		char what[64];

		if (k >= used || k < 0 || (i < sizeof(keep) / sizeof(keep[0]) && k == used - 1))
			continue;
		memset(bad, 0, sizeof(bad));
		memcpy(bad, good, k);
		snprintf(what, sizeof(what), "truncated-to-%d-bytes", k);
		rc |= try_bad_handle(s, what, bad);
	}
	/* The good handle must still work after all that. */
	if (self_connect(s, good, lc))
		rc = -1;
	if (close_comms(s, NULL, NULL, lc))
		rc = -1;
	return rc ? -1 : 0;
}

/*
 * Peer death: the victim completes a few messages, then SIGKILLs itself with requests
 * in flight; the survivor must get ncclRemoteError or ncclSystemError within the bound,
 * then close without hanging.
 */
static int kill_scenario(struct side *s, char victim)
{
	void *lc = NULL, *rc = NULL, *sc = NULL;
	bool receiver = s->role == 'a';
	struct xfer_plan p;
	struct xfer x;
	int ret = -1, xr;

	/* 1 MiB messages: too big to vanish into socket buffers, so a dead receiver is
	 * noticed by the sender too. */
	plan_fixed(&p, 400, 1 << 20, 1 << 20, 0);
	if (s->role == victim)
		p.kill_after = 6;
	else
		p.expect_error = true;
	memset(&x, 0, sizeof(x));
	if (receiver ? link_accept(s, s->ctx, "k", &lc, &rc) : link_connect(s, s->ctx, "k", &sc))
		goto out;
	/* the survivor must be connected before the victim dies */
	if (rdv_sync(s, "connected"))
		goto out;
	xr = xfer_run(&x, s, receiver ? rc : sc, &p, !receiver);
	if (s->role == victim) {
		conf_fail(s, "the victim's transfer ended (%d) before it could die", xr);
		goto out;
	}
	if (xr != 1)
		goto out; /* already reported */
	if (x.err_rc != ncclRemoteError && x.err_rc != ncclSystemError) {
		conf_fail(s,
			  "%s returned %s (%d) when the peer died: expected ncclRemoteError "
			  "(6) or ncclSystemError (2)",
			  x.err_call, netapi_result_str(x.err_rc), x.err_rc);
		goto out;
	}
	conf_log(s,
		 "survivor: %d messages done before, error %s %.2f s after the last "
		 "progress",
		 x.msgs_done, netapi_result_str(x.err_rc), x.err_after_s);
	/* A death is noticed within BRAID_LIVENESS_MS of the next call; twice that, plus a
	 * second for a loaded machine, from the survivor's last progress. */
	if (x.err_after_s > 2 * liveness_s() + 1.0) {
		conf_fail(s,
			  "the peer's death surfaced %.2f s after the last progress; "
			  "BRAID_LIVENESS_MS is %.0f ms",
			  x.err_after_s, liveness_s() * 1000);
		goto out;
	}
	ret = 0;
out:
	xfer_dereg(&x);
	{
		double t0 = now_s();

		/* A close may report the dead peer; it must return, and in bounded time. */
		close_comms(s, sc, rc, lc);
		if (now_s() - t0 > CONF_CLOSE_TIMEOUT_S)
			ret = -1;
	}
	xfer_free(&x);
	plan_free(&p);
	return ret;
}

int sc_kill_sender(struct side *s)
{
	return kill_scenario(s, 'b');
}

int sc_kill_receiver(struct side *s)
{
	return kill_scenario(s, 'a');
}
