// SPDX-License-Identifier: Apache-2.0
/*
 * The data engine: posts a plan's messages with a window of requests in flight, polls
 * test() on every outstanding request, and verifies every byte on receipt, including
 * that the bytes past the message (inside and beyond the receive buffer) are untouched.
 */
#include "tests/conformance/conf.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/pattern.h"

#define GUARD_BYTES 64 /* checked past the end of every receive buffer */
#define GUARD_SALT 0x6a09e667f3bcc908ULL
#define ARENA_ALIGN_SLACK 64 /* arena buffers start at odd offsets, 0..63 */

struct xfer_slot {
	bool busy;   /* holds a prepared operation */
	bool posted; /* isend/irecv accepted it (request non-NULL) */
	void *req;
	int index; /* receiver: group index; sender: position in the send sequence */
	int n;     /* buffers: group size (receiver) or 1 (sender) */
	int msg[XFER_MAX_GROUP];
	char *buf[XFER_MAX_GROUP];
	void *mh[XFER_MAX_GROUP];
	bool own[XFER_MAX_GROUP]; /* malloc()ed and registered for this message alone */
	size_t bytes;             /* counted against plan.inflight_bytes */
};

static size_t arena_stride(const struct xfer_plan *p)
{
	size_t max = 1;

	for (int i = 0; i < p->nmsgs; i++) {
		size_t need = p->msgs[i].cap > p->msgs[i].size ? p->msgs[i].cap : p->msgs[i].size;

		if (need > max)
			max = need;
	}
	return (max + GUARD_BYTES + ARENA_ALIGN_SLACK + 63) & ~(size_t)63;
}

static int record_error(struct xfer *x, ncclResult_t r, double since, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int record_error(struct xfer *x, ncclResult_t r, double since, const char *fmt, ...)
{
	va_list ap;

	x->err_rc = r;
	x->err_at = now_s();
	x->err_after_s = x->err_at - since;
	va_start(ap, fmt);
	vsnprintf(x->err_call, sizeof(x->err_call), fmt, ap);
	va_end(ap);
	if (!x->p->expect_error)
		conf_fail(x->s, "%s returned %s (%d)", x->err_call, netapi_result_str(r), r);
	else
		conf_log(x->s,
			 "expected error: %s returned %s (%d), %.2f s after the last "
			 "progress",
			 x->err_call, netapi_result_str(r), r, x->err_after_s);
	return 1;
}

/* Buffer i of slot `sl` for message m: its own MR, or a sub-range of the arena. */
static int slot_buffer(struct xfer *x, int slot_no, struct xfer_slot *sl, int i, int m)
{
	const struct xfer_msg *msg = &x->p->msgs[m];
	size_t len = x->sender ? msg->size : (msg->cap > msg->size ? msg->cap : msg->size);
	ncclResult_t r;

	sl->msg[i] = m;
	if (x->arena) {
		size_t per_slot = x->sender ? 1 : XFER_MAX_GROUP;
		size_t off = ((size_t)slot_no * per_slot + i) * x->stride +
			     msg->id % ARENA_ALIGN_SLACK;

		sl->buf[i] = x->arena + off;
		sl->mh[i] = x->arena_mh;
		sl->own[i] = false;
	} else {
		sl->buf[i] = malloc(len + GUARD_BYTES);
		if (!sl->buf[i])
			return conf_fail(x->s, "malloc(%zu) for message %d", len + GUARD_BYTES, m);
		sl->own[i] = true;
		r = x->s->api->reg_mr(x->s->api, x->comm, sl->buf[i], len ? len : 1, &sl->mh[i]);
		if (r != ncclSuccess) {
			conf_fail(x->s, "regMr(%p, %zu, NCCL_PTR_HOST) returned %s (%d)",
				  (void *)sl->buf[i], len ? len : 1, netapi_result_str(r), r);
			sl->mh[i] = NULL;
			return -1;
		}
	}
	if (x->sender) {
		pattern_fill(sl->buf[i], msg->size, x->s->seed, msg->id);
	} else {
		/* guard pattern over the whole buffer and past it */
		pattern_fill(sl->buf[i], len + GUARD_BYTES, x->s->seed, msg->id ^ GUARD_SALT);
	}
	sl->bytes += len;
	return 0;
}

static void slot_release(struct xfer *x, struct xfer_slot *sl)
{
	for (int i = 0; i < sl->n; i++) {
		if (sl->own[i]) {
			if (sl->mh[i])
				x->s->api->dereg_mr(x->s->api, x->comm, sl->mh[i]);
			free(sl->buf[i]);
		}
		sl->buf[i] = NULL;
		sl->mh[i] = NULL;
		sl->own[i] = false;
	}
	memset(sl, 0, sizeof(*sl));
}

/*
 * Check a completed receive buffer: the message, then the untouched rest. A message
 * larger than its buffer arrives truncated to the buffer, as NCCL's IB transport
 * delivers it (p2p.cc: `if (size > slots[r].size) size = slots[r].size`): test()
 * reports the bytes that arrived, and not one byte lands past the buffer.
 */
static int verify_recv(struct xfer *x, const struct xfer_slot *sl, int i, int got_size)
{
	const struct xfer_msg *msg = &x->p->msgs[sl->msg[i]];
	size_t len = msg->cap > msg->size ? msg->cap : msg->size;
	size_t want = msg->size < msg->cap ? msg->size : msg->cap;
	const unsigned char *b = (const unsigned char *)sl->buf[i];
	size_t bad;

	if (got_size < 0 || (size_t)got_size != want)
		return conf_fail(x->s,
				 "message %lu (group %d, buffer %d of %d, tag %d): test() "
				 "reported size %d, expected %zu (sent %zu into a %zu-byte buffer)",
				 (unsigned long)msg->id, sl->index, i, sl->n, msg->tag, got_size,
				 want, msg->size, msg->cap);
	bad = pattern_check(b, want, x->s->seed, msg->id);
	if (bad != (size_t)-1)
		return conf_fail(x->s,
				 "message %lu (group %d, buffer %d of %d, tag %d, size %zu):"
				 " byte %zu is 0x%02x, expected 0x%02x",
				 (unsigned long)msg->id, sl->index, i, sl->n, msg->tag, want, bad,
				 b[bad], pattern_byte(x->s->seed, msg->id, bad));
	/* The guard pattern covered [0, len + GUARD): what is past the bytes that
	 * arrived must still be that pattern. */
	bad = pattern_check_range(b, want, len + GUARD_BYTES, x->s->seed, msg->id ^ GUARD_SALT);
	if (bad != (size_t)-1)
		return conf_fail(x->s,
				 "message %lu (size %zu, receive buffer %zu): byte %zu "
				 "past the message %s was overwritten (0x%02x, was 0x%02x)",
				 (unsigned long)msg->id, msg->size, msg->cap, bad,
				 bad < msg->cap ? "inside the buffer" : "BEYOND THE BUFFER", b[bad],
				 pattern_byte(x->s->seed, msg->id ^ GUARD_SALT, bad));
	return 0;
}

/* After an error on the receiver: nothing may have been written past any buffer. */
static int verify_guards(struct xfer *x)
{
	int rc = 0;

	for (int s = 0; s < x->nslots; s++) {
		struct xfer_slot *sl = &x->slots[s];

		for (int i = 0; sl->busy && i < sl->n; i++) {
			const struct xfer_msg *msg = &x->p->msgs[sl->msg[i]];
			size_t len = msg->cap > msg->size ? msg->cap : msg->size;
			const unsigned char *b = (const unsigned char *)sl->buf[i];

			size_t bad = pattern_check_range(b, msg->cap, len + GUARD_BYTES, x->s->seed,
							 msg->id ^ GUARD_SALT);

			if (bad != (size_t)-1)
				rc = conf_fail(x->s,
					       "message %lu (size %zu): byte %zu past the "
					       "%zu-byte receive buffer was overwritten",
					       (unsigned long)msg->id, msg->size, bad, msg->cap);
		}
	}
	return rc;
}

/*
 * A completed receive, flushed as NCCL does before the data is read (net.cc: iflush when
 * the buffer is GPU memory); for a plan's flush_pct of the groups, chosen by message id so
 * that a seed replays the same ones. The flush request is polled to the end, bounded.
 */
static int maybe_flush(struct xfer *x, struct xfer_slot *sl, const int *sizes, double bound_s)
{
	const struct net_api *api = x->s->api;
	const struct xfer_msg *m0 = &x->p->msgs[sl->msg[0]];
	int fsizes[XFER_MAX_GROUP], done = 0, got[XFER_MAX_GROUP];
	void *data[XFER_MAX_GROUP], *req = NULL;
	double t0 = now_s();
	long total = 0;
	ncclResult_t r;

	if (x->p->flush_pct <= 0 ||
	    (m0->id * 0x9e3779b97f4a7c15ULL >> 33) % 100 >= (uint64_t)x->p->flush_pct)
		return 0;
	for (int i = 0; i < sl->n; i++) {
		data[i] = sl->buf[i];
		fsizes[i] = sizes[i];
		total += sizes[i] > 0 ? sizes[i] : 0;
	}
	if (!total) /* as NCCL: nothing arrived, nothing to flush */
		return 0;
	r = api->iflush(api, x->comm, sl->n, data, fsizes, sl->mh, &req);
	if (r != ncclSuccess)
		return conf_fail(x->s, "iflush(group %d, n %d) returned %s (%d)", sl->index, sl->n,
				 netapi_result_str(r), r);
	x->flushes++;
	if (x->p->kill_in_flush > 0 && x->flushes >= x->p->kill_in_flush)
		conf_die(x->s, "inside an iflush");
	while (req && !done) {
		r = api->test(api, req, &done, got);
		if (r != ncclSuccess)
			return conf_fail(x->s, "test(iflush of group %d) returned %s (%d)",
					 sl->index, netapi_result_str(r), r);
		if (!done && now_s() - t0 > bound_s)
			return conf_fail(x->s, "iflush of group %d not done after %.0f s",
					 sl->index, bound_s);
	}
	return 0;
}

static int prepare(struct xfer *x, int slot_no, int index, const int *send_seq)
{
	struct xfer_slot *sl = &x->slots[slot_no];

	memset(sl, 0, sizeof(*sl));
	sl->busy = true;
	sl->index = index;
	if (x->sender) {
		sl->n = 1;
		return slot_buffer(x, slot_no, sl, 0, send_seq[index]);
	}
	sl->n = x->p->groups[index].n;
	for (int i = 0; i < sl->n; i++)
		if (slot_buffer(x, slot_no, sl, i, x->p->groups[index].first + i))
			return -1;
	return 0;
}

static ncclResult_t post(struct xfer *x, struct xfer_slot *sl)
{
	const struct net_api *api = x->s->api;

	if (x->sender) {
		const struct xfer_msg *m = &x->p->msgs[sl->msg[0]];

		return api->isend(api, x->comm, sl->buf[0], m->size, m->tag, sl->mh[0], &sl->req);
	}
	size_t sizes[XFER_MAX_GROUP];
	int tags[XFER_MAX_GROUP];
	void *data[XFER_MAX_GROUP];

	for (int i = 0; i < sl->n; i++) {
		sizes[i] = x->p->msgs[sl->msg[i]].cap;
		tags[i] = x->p->msgs[sl->msg[i]].tag;
		data[i] = sl->buf[i];
	}
	return api->irecv(api, x->comm, sl->n, data, sizes, tags, sl->mh, &sl->req);
}

int xfer_run(struct xfer *x, struct side *s, void *comm, const struct xfer_plan *p, bool sender)
{
	int total = sender ? p->nmsgs : p->ngroups;
	int window = sender ? p->send_window : p->recv_window;
	int *send_seq = NULL, next = 0, done = 0, busy = 0, rc = -1;
	size_t inflight = 0;
	double start = now_s(), last_progress = start, stall_limit;
	unsigned long loops = 0;
	int pending = -1; /* slot prepared but not yet accepted by isend/irecv */

	memset(x, 0, sizeof(*x));
	x->s = s;
	x->comm = comm;
	x->p = p;
	x->sender = sender;
	x->nslots = window;
	x->slots = calloc(window, sizeof(*x->slots));
	stall_limit = p->expect_error ? CONF_ERROR_BOUND_S : CONF_XFER_TIMEOUT_S;
	if (!x->slots)
		return conf_fail(s, "calloc(%d slots)", window);
	if (sender) {
		/* Each group's messages go out consecutively, in its shuffled order. */
		int k = 0;

		send_seq = malloc(sizeof(int) * (p->nmsgs ? p->nmsgs : 1));
		if (!send_seq)
			return conf_fail(s, "malloc(send sequence)");
		for (int g = 0; g < p->ngroups; g++)
			for (int j = 0; j < p->groups[g].n; j++)
				send_seq[k++] = p->groups[g].first + p->groups[g].send_order[j];
	}
	if (p->arena) {
		ncclResult_t r;

		x->stride = arena_stride(p);
		/* a send slot holds one message, a receive slot a whole group */
		x->arena_len = (size_t)window * (sender ? 1 : XFER_MAX_GROUP) * x->stride;
		x->arena = malloc(x->arena_len);
		if (!x->arena) {
			rc = conf_fail(s, "malloc(arena %zu)", x->arena_len);
			goto out;
		}
		conf_step(s, "regMr(arena of %zu bytes)", x->arena_len);
		r = s->api->reg_mr(s->api, comm, x->arena, x->arena_len, &x->arena_mh);
		if (r != ncclSuccess) {
			rc = conf_fail(s, "regMr(%zu bytes) returned %s (%d)", x->arena_len,
				       netapi_result_str(r), r);
			goto out;
		}
	}
	conf_step(s, "%s %d %s", sender ? "sending" : "receiving", total,
		  sender ? "messages" : "groups");

	while (done < total) {
		bool progress = false;
		ncclResult_t r;

		/* Post while the window and the memory bound allow. */
		while (next < total) {
			if (pending < 0) {
				if (busy >= window || (busy > 0 && inflight >= p->inflight_bytes))
					break;
				for (pending = 0; x->slots[pending].busy; pending++)
					;
				if (prepare(x, pending, next, send_seq))
					goto out;
				inflight += x->slots[pending].bytes;
				busy++;
			}
			struct xfer_slot *sl = &x->slots[pending];

			r = post(x, sl);
			if (r != ncclSuccess) {
				rc = record_error(x, r, last_progress, "%s(#%d, %s %zu)",
						  sender ? "isend" : "irecv", next,
						  sender ? "size" : "n",
						  sender ? p->msgs[sl->msg[0]].size
							 : (size_t)sl->n);
				goto out;
			}
			if (!sl->req)
				break; /* "not now": call again later, as NCCL does */
			sl->posted = true;
			pending = -1;
			next++;
			progress = true;
		}

		/* Test everything outstanding; completions may come in any order. */
		for (int i = 0; i < window; i++) {
			struct xfer_slot *sl = &x->slots[i];
			int sizes[XFER_MAX_GROUP], fin = 0;

			if (!sl->posted)
				continue;
			for (int j = 0; j < XFER_MAX_GROUP; j++)
				sizes[j] = -1;
			r = s->api->test(s->api, sl->req, &fin, sizes);
			if (r != ncclSuccess) {
				rc = record_error(x, r, last_progress, "test(%s #%d)",
						  sender ? "isend" : "irecv", sl->index);
				goto out;
			}
			if (!fin)
				continue;
			sl->posted = false;
			if (!sender && maybe_flush(x, sl, sizes, stall_limit))
				goto out;
			for (int j = 0; !sender && j < sl->n; j++)
				if (verify_recv(x, sl, j, sizes[j]))
					goto out;
			for (int j = 0; j < sl->n; j++)
				x->bytes_done += p->msgs[sl->msg[j]].size;
			x->msgs_done += sl->n;
			inflight -= sl->bytes;
			slot_release(x, sl);
			busy--;
			done++;
			progress = true;
			if (p->kill_after > 0 && x->msgs_done >= p->kill_after) {
				/* the victim of a peer-death scenario dies with requests in flight */
				conf_log(s,
					 "killing myself (SIGKILL) after %d messages, %d requests "
					 "in flight",
					 x->msgs_done, busy);
				conf_die(s, "during a transfer");
			}
		}

		if (progress) {
			last_progress = now_s();
			continue;
		}
		if (now_s() - last_progress > stall_limit) {
			if (p->expect_error)
				rc = conf_fail(s,
					       "no error within %.0f s of the last progress "
					       "(%d of %d done, %d in flight)",
					       stall_limit, done, total, busy);
			else
				rc = conf_fail(s,
					       "no progress for %.0f s (%d of %d done, %d in "
					       "flight, next %d)",
					       stall_limit, done, total, busy, next);
			goto out;
		}
		if ((++loops & 4095) == 0 && rdv_peer_aborted(s)) {
			rc = conf_fail(s, "peer gave up (%d of %d done)", done, total);
			goto out;
		}
		idle_wait();
	}
	if (p->expect_error)
		rc = conf_fail(s, "all %d %s completed without the expected error", total,
			       sender ? "sends" : "receives");
	else
		rc = 0;
out:
	if (rc == 1 && !sender && verify_guards(x))
		rc = -1;
	free(send_seq);
	return rc;
}

void xfer_dereg(struct xfer *x)
{
	for (int i = 0; x->slots && i < x->nslots; i++)
		for (int j = 0; j < x->slots[i].n; j++)
			if (x->slots[i].own[j] && x->slots[i].mh[j]) {
				x->s->api->dereg_mr(x->s->api, x->comm, x->slots[i].mh[j]);
				x->slots[i].mh[j] = NULL;
			}
	if (x->arena_mh) {
		x->s->api->dereg_mr(x->s->api, x->comm, x->arena_mh);
		x->arena_mh = NULL;
	}
}

void xfer_free(struct xfer *x)
{
	for (int i = 0; x->slots && i < x->nslots; i++)
		for (int j = 0; j < x->slots[i].n; j++)
			if (x->slots[i].own[j])
				free(x->slots[i].buf[j]);
	free(x->slots);
	free(x->arena);
	x->slots = NULL;
	x->arena = NULL;
}

void conf_die(struct side *s, const char *when)
{
	double t = now_s();

	conf_log(s, "SIGKILL to myself %s", when);
	rdv_put(s, "killed", &t, sizeof(t));
	raise(SIGKILL);
}

int xfer_drain(struct xfer *x, double bound_s, double *last_at)
{
	double t0 = now_s();
	int left;

	*last_at = x->err_at;
	do {
		left = 0;
		for (int i = 0; x->slots && i < x->nslots; i++) {
			struct xfer_slot *sl = &x->slots[i];
			int sizes[XFER_MAX_GROUP], fin = 0;
			ncclResult_t r;

			if (!sl->posted)
				continue;
			r = x->s->api->test(x->s->api, sl->req, &fin, sizes);
			if (r == ncclSuccess && !fin) {
				left++;
				continue;
			}
			sl->posted = false;
			*last_at = now_s();
			for (int j = 0; r == ncclSuccess && !x->sender && j < sl->n; j++)
				if (verify_recv(x, sl, j, sizes[j]))
					return -1;
		}
		if (left && now_s() - t0 > bound_s)
			return conf_fail(x->s,
					 "%d requests neither failed nor completed %.1f s "
					 "after the first error",
					 left, bound_s);
		if (left)
			idle_wait();
	} while (left);
	return 0;
}
