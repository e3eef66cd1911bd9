// SPDX-License-Identifier: Apache-2.0
/*
 * `braid perf`'s timed phases, driven as NCCL drives the plugin (registered buffers, a
 * window of isend/irecv requests, test() until done, each wait bounded): streaming
 * bandwidth per size, then ping-pong latency. The streamer sends and prints; the other
 * side receives and verifies, byte by byte, the first and last timed iteration of every
 * size.
 */
#include "tools/perf.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "tools/pattern.h"

/* ---- plugin calls, polled with a bound ---- */

int perf_check_call(const struct perf *p, ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return 0;
	return perf_err(p, "%s returned %s (%d)", what, netapi_result_str(r), r);
}

/* Post a send or receive of one buffer, calling again while the plugin says "not now". */
static int post_one(struct perf *p, bool send, void *buf, size_t size, void *mh, void **req,
		    const char *what)
{
	double deadline = perf_now_us() + PERF_PHASE_TIMEOUT_S * 1e6;
	unsigned long polls = 0;
	int tag = 1;
	ncclResult_t r;

	for (;;) {
		*req = NULL;
		r = send ? p->api.isend(&p->api, p->sc, buf, size, tag, mh, req)
			 : p->api.irecv(&p->api, p->rc, 1, &buf, &size, &tag, &mh, req);
		if (perf_check_call(p, r, what))
			return -1;
		if (*req)
			return 0;
		if ((++polls & 255) == 0 && perf_now_us() > deadline)
			return perf_err(p, "%s: not accepted within %.0f s", what,
					PERF_PHASE_TIMEOUT_S);
		sched_yield();
	}
}

static int wait_one(struct perf *p, void *req, int *size, const char *what)
{
	double deadline = perf_now_us() + PERF_PHASE_TIMEOUT_S * 1e6;
	unsigned long polls = 0;
	int done = 0, sizes[8] = { -1 };

	for (;;) {
		if (perf_check_call(p, p->api.test(&p->api, req, &done, sizes), what))
			return -1;
		if (done) {
			if (size)
				*size = sizes[0];
			return 0;
		}
		if ((++polls & 255) == 0 && perf_now_us() > deadline)
			return perf_err(p, "%s: not done within %.0f s", what,
					PERF_PHASE_TIMEOUT_S);
		if ((polls & 15) == 0)
			sched_yield(); /* 2 processes and provider threads may share few cores */
	}
}

static int send_ctrl(struct perf *p, uint32_t kind, uint32_t ok, uint64_t seq)
{
	struct perf_ctrl c = { kind, ok, seq };
	void *req;

	memcpy(p->ssmall, &c, sizeof(c));
	if (post_one(p, true, p->ssmall, sizeof(c), p->ssmall_mh, &req, "isend(control)"))
		return -1;
	return wait_one(p, req, NULL, "test(isend control)");
}

static int recv_ctrl(struct perf *p, struct perf_ctrl *c, void *req)
{
	int size = -1;

	if (wait_one(p, req, &size, "test(irecv control)"))
		return -1;
	if (size != sizeof(*c))
		return perf_err(p, "control message of %d bytes, expected %zu", size, sizeof(*c));
	memcpy(c, p->rsmall, sizeof(*c));
	return 0;
}

/* ---- streaming ---- */

/* Buffer of iteration i of n: the two checked ones apart, the rest share one. */
static char *stream_buf(struct perf *p, bool verify, int i, int n)
{
	if (verify && i == 0)
		return p->big;
	if (verify && i == n - 1)
		return p->big + p->o.max;
	return p->big + 2 * p->o.max;
}

static uint64_t check_id(size_t size, int first_or_last)
{
	return (uint64_t)size * 2 + first_or_last;
}

/* One phase: n messages of `size`, window in flight. Returns 0, sets *ok, *usec. */
static int stream_phase(struct perf *p, size_t size, int n, bool verify, uint64_t seq, bool *ok,
			double *usec)
{
	void *reqs[PERF_MAX_WINDOW] = { 0 };
	int idx[PERF_MAX_WINDOW];
	int posted = 0, done = 0, inflight = 0, w = p->o.window;
	double deadline = perf_now_us() + PERF_PHASE_TIMEOUT_S * 1e6, t0;
	struct perf_ctrl c;
	void *ctrl_req;
	unsigned long polls = 0;
	char what[96];

	*ok = true;
	if (p->streamer) {
		if (verify) {
			pattern_fill(stream_buf(p, true, 0, n), size, PERF_SEED, check_id(size, 0));
			if (n > 1)
				pattern_fill(stream_buf(p, true, n - 1, n), size, PERF_SEED,
					     check_id(size, 1));
		}
		/* wait for "go": the receiver has its window posted */
		if (post_one(p, false, p->rsmall, PERF_CTRL_BYTES, p->rsmall_mh, &ctrl_req,
			     "irecv(go)") ||
		    recv_ctrl(p, &c, ctrl_req))
			return -1;
		if (c.kind != 1 || c.seq != seq)
			return perf_err(p, "out of step: control %u/%llu, expected go/%llu", c.kind,
					(unsigned long long)c.seq, (unsigned long long)seq);
		/* post the "ack" receive before streaming, as NCCL keeps receives posted */
		if (post_one(p, false, p->rsmall, PERF_CTRL_BYTES, p->rsmall_mh, &ctrl_req,
			     "irecv(ack)"))
			return -1;
	}
	t0 = perf_now_us();
	while (done < n) {
		bool progress = false;

		while (posted < n && inflight < w) {
			int slot;
			ncclResult_t r;
			char *buf = stream_buf(p, verify, posted, n);
			int tag = 1;

			for (slot = 0; reqs[slot]; slot++)
				;
			if (p->streamer) {
				r = p->api.isend(&p->api, p->sc, buf, size, tag, p->big_mh,
						 &reqs[slot]);
			} else {
				size_t sz = size;
				void *b = buf;

				r = p->api.irecv(&p->api, p->rc, 1, &b, &sz, &tag, &p->big_mh,
						 &reqs[slot]);
			}
			if (r != ncclSuccess) {
				snprintf(what, sizeof(what), "%s(%zu bytes, iteration %d)",
					 p->streamer ? "isend" : "irecv", size, posted);
				return perf_check_call(p, r, what);
			}
			if (!reqs[slot])
				break;
			idx[slot] = posted++;
			inflight++;
			progress = true;
		}
		if (!p->streamer && seq != UINT64_MAX && posted >= (n < w ? n : w)) {
			/* the window is posted: tell the streamer to go (once) */
			if (send_ctrl(p, 1, 1, seq))
				return -1;
			seq = UINT64_MAX;
			t0 = perf_now_us();
		}
		for (int s = 0; s < w; s++) {
			int fin = 0, sizes[8] = { -1 };

			if (!reqs[s])
				continue;
			ncclResult_t r = p->api.test(&p->api, reqs[s], &fin, sizes);

			if (r != ncclSuccess) {
				snprintf(what, sizeof(what), "test(%s of %zu bytes, iteration %d)",
					 p->streamer ? "isend" : "irecv", size, idx[s]);
				return perf_check_call(p, r, what);
			}
			if (!fin)
				continue;
			reqs[s] = NULL;
			inflight--;
			done++;
			progress = true;
			if (p->streamer)
				continue;
			if ((size_t)sizes[0] != size) {
				if (*ok) /* the first one says enough */
					perf_err(p,
						 "iteration %d of %zu bytes: test() reported %d bytes",
						 idx[s], size, sizes[0]);
				*ok = false;
			}
			if (verify && (idx[s] == 0 || idx[s] == n - 1)) {
				int which = idx[s] == 0 ? 0 : 1;
				size_t bad = pattern_check(stream_buf(p, true, idx[s], n), size,
							   PERF_SEED, check_id(size, which));

				if (bad != (size_t)-1) {
					perf_err(p, "%zu bytes, %s iteration: byte %zu is wrong",
						 size, which ? "last" : "first", bad);
					*ok = false;
				}
			}
		}
		if (!progress) {
			if ((++polls & 255) == 0 && perf_now_us() > deadline)
				return perf_err(p, "%zu-byte stream: %d of %d done after %.0f s",
						size, done, n, PERF_PHASE_TIMEOUT_S);
			if ((polls & 15) == 0)
				sched_yield();
		}
	}
	if (p->streamer) {
		if (recv_ctrl(p, &c, ctrl_req))
			return -1;
		*usec = perf_now_us() - t0;
		if (c.kind != 2)
			return perf_err(p, "out of step: control %u, expected ack", c.kind);
		*ok = c.ok != 0;
	} else {
		*usec = perf_now_us() - t0;
		if (send_ctrl(p, 2, *ok, 0))
			return -1;
	}
	return 0;
}

int perf_run_bandwidth(struct perf *p, bool *all_ok)
{
	uint64_t seq = 0;

	if (p->streamer)
		printf("#%12s %8s %12s %10s %10s %12s  %s\n", "bytes", "iters", "time(us)", "GB/s",
		       "Gbit/s", "msg/s", "check");
	for (size_t size = p->o.min;; size = size ? size * 2 : 1) {
		int n = perf_iters_for(&p->o, size), wu = perf_warmup_for(&p->o, n);
		double usec = 0;
		bool ok = true;

		if (wu > 0 && stream_phase(p, size, wu, false, seq++, &ok, &usec))
			return -1;
		if (stream_phase(p, size, n, true, seq++, &ok, &usec))
			return -1;
		if (!ok)
			*all_ok = false;
		if (p->streamer) {
			double sec = usec * 1e-6, bytes = (double)size * n;

			printf("%13zu %8d %12.2f %10.3f %10.3f %12.0f  %s\n", size, n, usec / n,
			       bytes / sec / 1e9, bytes * 8 / sec / 1e9, n / sec,
			       ok ? "ok" : "WRONG DATA");
			fflush(stdout);
		}
		if (size >= p->o.max)
			break;
		if (size && size * 2 > p->o.max)
			size = p->o.max / 2; /* end exactly on --max */
	}
	return 0;
}

/* ---- latency ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int perf_run_latency(struct perf *p, bool *all_ok)
{
	int n = p->o.lat_iters, wu = n / 10 < 10 ? 10 : n / 10, total = n + wu;
	size_t size = p->o.lat_size;
	double *half = calloc(n, sizeof(double));
	void *rreq = NULL, *sreq = NULL;
	bool ok = true;
	int rc = -1, got;

	if (!half)
		return perf_err(p, "calloc(%d)", n);
	if (post_one(p, false, p->rsmall, size, p->rsmall_mh, &rreq, "irecv(ping-pong)"))
		goto out;
	for (int i = 0; i < total; i++) {
		bool check = i == wu || i == total - 1;
		double t0;

		if (p->streamer) {
			/* ping, wait for the pong */
			if (check)
				pattern_fill(p->ssmall, size, PERF_SEED, 1000 + i);
			t0 = perf_now_us();
			if (post_one(p, true, p->ssmall, size, p->ssmall_mh, &sreq,
				     "isend(ping)") ||
			    wait_one(p, sreq, NULL, "test(isend ping)") ||
			    wait_one(p, rreq, &got, "test(irecv pong)"))
				goto out;
			if (i >= wu)
				half[i - wu] = (perf_now_us() - t0) / 2;
		} else {
			if (wait_one(p, rreq, &got, "test(irecv ping)"))
				goto out;
		}
		if ((size_t)got != size) {
			perf_err(p, "ping-pong %d: received %d bytes, sent %zu", i, got, size);
			ok = false;
		} else if (check && pattern_check(p->rsmall, size, PERF_SEED,
						  (p->streamer ? 2000 : 1000) + i) != (size_t)-1) {
			perf_err(p, "ping-pong %d: wrong data", i);
			ok = false;
		}
		/* the next receive goes up before the reply, as a ping may follow it at once */
		if (i + 1 < total &&
		    post_one(p, false, p->rsmall, size, p->rsmall_mh, &rreq, "irecv(ping-pong)"))
			goto out;
		if (!p->streamer) {
			if (check)
				pattern_fill(p->ssmall, size, PERF_SEED, 2000 + i);
			if (post_one(p, true, p->ssmall, size, p->ssmall_mh, &sreq,
				     "isend(pong)") ||
			    wait_one(p, sreq, NULL, "test(isend pong)"))
				goto out;
		}
	}
	if (p->streamer) {
		double sum = 0;

		qsort(half, n, sizeof(double), cmp_double);
		for (int i = 0; i < n; i++)
			sum += half[i];
		printf("# latency: %zu-byte ping-pong, %d iterations (+%d warm-up), half round "
		       "trip:\n",
		       size, n, wu);
		printf("#   avg %.2f us   p50 %.2f us   p99 %.2f us   min %.2f us   max %.2f us"
		       "   check %s\n",
		       sum / n, half[n / 2],
		       half[(size_t)n * 99 / 100 < (size_t)n ? (size_t)n * 99 / 100 : (size_t)n - 1],
		       half[0], half[n - 1], ok ? "ok" : "WRONG DATA");
	}
	if (!ok)
		*all_ok = false;
	rc = 0;
out:
	free(half);
	return rc;
}
