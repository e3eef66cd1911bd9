// SPDX-License-Identifier: Apache-2.0
/* Scenarios where everything goes right: properties, streams, grouped receives, threads,
 * and v11's per-communicator init. */
#include "tests/conformance/conf.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "plugin/counters.h"
#include "tools/ctr_self.h"
#include "tools/pattern.h"

int sc_props(struct side *s)
{
	void *handle_buf[NCCL_NET_HANDLE_MAXSIZE / sizeof(void *)];
	int ndev = 0, rc = 0;
	ncclResult_t r;

	conf_step(s, "devices()");
	r = s->api->devices(s->api, &ndev);
	if (r != ncclSuccess || ndev < 1)
		return conf_fail(s, "devices returned %s (%d), ndev %d", netapi_result_str(r), r,
				 ndev);
	for (int d = 0; d < ndev; d++) {
		struct net_props p;

		conf_step(s, "getProperties(%d)", d);
		r = s->api->get_props(s->api, d, &p);
		if (r != ncclSuccess) {
			rc = conf_fail(s, "returned %s (%d)", netapi_result_str(r), r);
			continue;
		}
		conf_log(s,
			 "dev %d: name '%s' pci '%s' guid 0x%llx ptrSupport 0x%x speed %d "
			 "Mbps port %d latency %.2f us maxComms %d maxRecvs %d regIsGlobal %d "
			 "vdevs %d maxP2pBytes %zu maxCollBytes %zu",
			 d, p.name, p.pci_path, (unsigned long long)p.guid, p.ptr_support, p.speed,
			 p.port, p.latency, p.max_comms, p.max_recvs, p.reg_is_global, p.vdev_ndevs,
			 p.max_p2p_bytes, p.max_coll_bytes);
		if (!p.name[0])
			rc = conf_fail(s, "dev %d: empty name", d);
		if (p.max_recvs < 1 || p.max_recvs > XFER_MAX_GROUP)
			rc = conf_fail(s, "dev %d: maxRecvs %d, not in 1..%d", d, p.max_recvs,
				       XFER_MAX_GROUP);
		if (p.speed <= 0)
			rc = conf_fail(s, "dev %d: speed %d Mbps", d, p.speed);
		if (!(p.ptr_support & NCCL_PTR_HOST))
			rc = conf_fail(s, "dev %d: ptrSupport 0x%x lacks NCCL_PTR_HOST", d,
				       p.ptr_support);
		if (!(p.latency >= 0.0f) || isinf(p.latency))
			rc = conf_fail(s, "dev %d: latency %f", d, p.latency);
		if (p.max_comms < 1)
			rc = conf_fail(s, "dev %d: maxComms %d", d, p.max_comms);
		if (s->api->version >= 9 && p.max_p2p_bytes == 0)
			rc = conf_fail(s, "dev %d: maxP2pBytes 0", d);
		if (s->api->version >= 9 && p.vdev_ndevs < 1)
			rc = conf_fail(s, "dev %d: vProps.ndevs %d", d, p.vdev_ndevs);
	}
	/* A listen that nobody connects to must close cleanly (NCCL does it on errors). */
	void *lc = NULL;

	conf_step(s, "listen(dev %d) then closeListen, unused", s->dev);
	r = s->api->listen(s->api, s->ctx, s->dev, handle_buf, &lc);
	if (r != ncclSuccess || !lc)
		return conf_fail(s, "listen returned %s (%d), listenComm %p", netapi_result_str(r),
				 r, lc);
	if (close_comms(s, NULL, NULL, lc))
		rc = -1;
	return rc;
}

/* A comm of several NICs counts, per NIC, the messages that went over it (braid stat's
 * lane "chunks"). With every message under the stripe threshold each went whole over one
 * NIC, so on either side the NICs' counts add up to the messages: no more (a NIC that
 * carried none of a message counts none of it) and no fewer. */
static int check_lane_chunks(struct side *s, const char *name, int msgs, bool receiver)
{
	uint32_t kind = receiver ? BRAID_CTR_COMM_RECV : BRAID_CTR_COMM_SEND;
	const struct braid_ctr_region *r;
	int rc = 0, found = 0;
	char why[160];

	if (ctr_self_map(&r, why, sizeof(why))) {
		conf_log(s, "%s: no counter region (%s), lane chunks not checked", name, why);
		return 0;
	}
	for (uint32_t i = 0; i < r->max_comms && i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];
		uint64_t sum = 0;

		if (c->kind != kind || c->nlanes < 2)
			continue;
		found++;
		for (uint32_t k = 0; k < c->nlanes && k < BRAID_CTR_MAX_LANES; k++)
			sum += c->lanes[k].chunks;
		if (sum != (uint64_t)msgs)
			rc = conf_fail(s,
				       "%s: the %u NICs of the %s comm count %llu chunks for %d "
				       "messages, each under the stripe threshold",
				       name, c->nlanes, receiver ? "receive" : "send",
				       (unsigned long long)sum, msgs);
		else
			conf_log(s, "%s: its %u NICs count one chunk a message", name, c->nlanes);
	}
	if (!found) /* a device of one NIC; on a fused run, one that did not fuse shows here */
		conf_log(s, "%s: no comm of several NICs, lane chunks not checked", name);
	ctr_self_unmap(r);
	return rc;
}

/* The receiver listens and receives the plan, the other side connects and sends it;
 * they meet again at the end so that nobody closes a comm the peer still uses. */
static int one_way_dir(struct side *s, void *ctx, const char *name, const struct xfer_plan *p,
		       bool receiver)
{
	void *lc = NULL, *rc = NULL, *sc = NULL;
	char done_name[64];
	struct xfer x;
	int ret, bad;

	memset(&x, 0, sizeof(x));
	if (receiver) {
		if (link_accept(s, ctx, name, &lc, &rc)) {
			close_comms(s, NULL, rc, lc);
			return -1;
		}
	} else if (link_connect(s, ctx, name, &sc)) {
		return -1;
	}
	ret = xfer_run(&x, s, receiver ? rc : sc, p, !receiver);
	if (ret == 0) {
		conf_log(s, "%s: %d messages, %zu bytes %s, all verified", name, x.msgs_done,
			 x.bytes_done, receiver ? "received" : "sent");
		bad = p->one_lane_each && check_lane_chunks(s, name, x.msgs_done, receiver);
		snprintf(done_name, sizeof(done_name), "%s-done", name);
		conf_step(s, "waiting for the peer to finish '%s'", name);
		ret = rdv_sync(s, done_name) || bad;
	}
	xfer_dereg(&x);
	if (close_comms(s, sc, rc, lc))
		ret = -1;
	xfer_free(&x);
	return ret ? -1 : 0;
}

/* a receives, b sends */
int one_way_plan(struct side *s, void *ctx, const char *name, const struct xfer_plan *p)
{
	return one_way_dir(s, ctx, name, p, s->role == 'a');
}

int sc_stream(struct side *s)
{
	struct xfer_plan p;
	int rc;

	plan_stream(&p, s->seed, 120, 4 << 20, true);
	rc = one_way_plan(s, s->ctx, "stream", &p);
	plan_free(&p);
	return rc;
}

int sc_zero_and_tiny(struct side *s)
{
	struct xfer_plan p;
	uint64_t st = s->seed;
	int rc;

	/* many 0..16-byte messages, the window always full */
	plan_fixed(&p, 600, 0, 0, 0);
	for (int i = 0; i < p.nmsgs; i++) {
		p.msgs[i].size = prng_range(&st, 0, 3) == 0 ? 0 : prng_range(&st, 1, 16);
		p.msgs[i].cap = p.msgs[i].size + prng_range(&st, 0, 1) * 32;
	}
	p.one_lane_each = true;
	rc = one_way_plan(s, s->ctx, "tiny", &p);
	plan_free(&p);
	return rc;
}

int sc_groups(struct side *s)
{
	struct xfer_plan p;
	int rc;

	conf_log(s, "grouped receives of up to %d buffers (maxRecvs)", s->props.max_recvs);
	plan_groups(&p, s->seed, 300, s->props.max_recvs, 256 << 10);
	rc = one_way_plan(s, s->ctx, "groups", &p);
	plan_free(&p);
	return rc;
}

/* ---- two comms, two threads, both directions at once ---- */

struct thread_arg {
	struct side s; /* a copy: each thread has its own step for messages */
	const char *name;
	bool receiver; /* on its comm, this thread receives */
	int rc;
};

static void *comm_thread(void *argp)
{
	struct thread_arg *t = argp;
	struct xfer_plan p;
	void *ctx = t->s.ctx;
	ncclResult_t r;

	/* v11: each thread is its own communicator, with its own init (concurrently). */
	if (t->s.api->version >= 11) {
		r = t->s.api->init(t->s.api, &ctx, t->s.seed ^ (uint64_t)t->name[1]);
		if (r != ncclSuccess) {
			t->rc = conf_fail(&t->s, "init (thread %s) returned %s (%d)", t->name,
					  netapi_result_str(r), r);
			return NULL;
		}
	}
	plan_stream(&p, t->s.seed ^ (t->name[1] * 7919ULL), 60, 1 << 20, false);
	t->rc = one_way_dir(&t->s, ctx, t->name, &p, t->receiver);
	plan_free(&p);
	if (t->s.api->version >= 11) {
		r = t->s.api->finalize(t->s.api, ctx);
		if (r != ncclSuccess)
			t->rc = conf_fail(&t->s, "finalize (thread %s) returned %s (%d)", t->name,
					  netapi_result_str(r), r);
	}
	return NULL;
}

int sc_threads(struct side *s)
{
	struct thread_arg t[2];
	pthread_t th[2];
	int rc = 0;

	for (int i = 0; i < 2; i++) {
		t[i].s = *s;
		t[i].name = i == 0 ? "t1" : "t2";
		/* t1: a receives from b; t2: b receives from a */
		t[i].receiver = (i == 0) == (s->role == 'a');
		t[i].rc = -1;
	}
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, comm_thread, &t[i])) {
			conf_fail(s, "pthread_create");
			for (int j = 0; j < i; j++)
				pthread_join(th[j], NULL);
			return -1;
		}
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		rc |= t[i].rc;
	}
	return rc ? -1 : 0;
}

/* v11: two inits, traffic on the second, finalize it, the first still works; then the
 * last finalize and a fresh init (NCCL does that for communicators created one after
 * the other). */
int sc_init_twice(struct side *s)
{
	void *ctx1 = NULL, *ctx2 = NULL, *ctx3 = NULL;
	struct xfer_plan p = { 0 };
	ncclResult_t r;
	int rc = -1;

	conf_step(s, "init #1");
	if ((r = s->api->init(s->api, &ctx1, s->seed + 1)) != ncclSuccess)
		return conf_fail(s, "returned %s (%d)", netapi_result_str(r), r);
	conf_step(s, "init #2");
	if ((r = s->api->init(s->api, &ctx2, s->seed + 2)) != ncclSuccess) {
		conf_fail(s, "returned %s (%d)", netapi_result_str(r), r);
		goto fin1;
	}
	plan_stream(&p, s->seed, 20, 256 << 10, false);
	if (one_way_plan(s, ctx2, "ctx2", &p))
		goto fin2;
	conf_step(s, "finalize #2");
	r = s->api->finalize(s->api, ctx2);
	ctx2 = NULL;
	if (r != ncclSuccess) {
		conf_fail(s, "returned %s (%d)", netapi_result_str(r), r);
		goto fin1;
	}
	conf_log(s, "one finalize done, one context left: it must still work");
	if (one_way_plan(s, ctx1, "ctx1", &p))
		goto fin1;
	conf_step(s, "finalize #1 (the last)");
	r = s->api->finalize(s->api, ctx1);
	ctx1 = NULL;
	if (r != ncclSuccess) {
		conf_fail(s, "returned %s (%d)", netapi_result_str(r), r);
		goto out;
	}
	conf_step(s, "init #3, after everything was finalized");
	if ((r = s->api->init(s->api, &ctx3, s->seed + 3)) != ncclSuccess) {
		conf_fail(s, "returned %s (%d)", netapi_result_str(r), r);
		goto out;
	}
	if (one_way_plan(s, ctx3, "ctx3", &p) == 0)
		rc = 0;
	conf_step(s, "finalize #3");
	if ((r = s->api->finalize(s->api, ctx3)) != ncclSuccess)
		rc = conf_fail(s, "returned %s (%d)", netapi_result_str(r), r);
	/* NCCL 2.29 finalizes the context of an init that failed: NULL, quietly */
	conf_step(s, "finalize(NULL), as NCCL after a failed init");
	{
		unsigned long warns = netapi_warn_count();

		r = s->api->finalize(s->api, NULL);
		if (r != ncclSuccess || netapi_warn_count() != warns)
			rc = conf_fail(s, "returned %s (%d) with %lu WARN line(s)",
				       netapi_result_str(r), r, netapi_warn_count() - warns);
	}
	goto out;
fin2:
	s->api->finalize(s->api, ctx2);
fin1:
	s->api->finalize(s->api, ctx1);
out:
	plan_free(&p);
	return rc;
}

/*
 * makeVDevice (v9+), as NCCL's topology code calls it: bad arguments fail with
 * ncclInvalidUsage (ncclIbMakeVDevice's answer) and leave devices() as it was; fusing
 * two devices, where the backend can, adds one device after the others whose vProps are
 * the two, whose name joins theirs with '+' and whose speed is their sum. A backend that
 * cannot fuse must say so with ncclInvalidUsage, never succeed without striping.
 */
int sc_vdevice(struct side *s)
{
	static const struct {
		int n;
		int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12 + 1];
		const char *what;
	} bad[] = {
		{ 0, { 0 }, "no device" },     { 5, { 0, 0, 0, 0, 0 }, "5 devices" },
		{ 9, { 0 }, "9 devices" },     { 2, { 0, 1000 }, "device 1000" },
		{ 2, { -1, 0 }, "device -1" }, { 2, { 0, 0 }, "device 0 twice" },
	};
	struct net_props a, b, f;
	int ndev = 0, after = 0, d = -1;
	ncclResult_t r;

	if (s->api->devices(s->api, &ndev) != ncclSuccess || ndev < 1)
		return conf_fail(s, "devices() failed");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		conf_step(s, "makeVDevice(%s)", bad[i].what);
		d = -7;
		r = s->api->make_vdevice(s->api, &d, bad[i].n, bad[i].devs);
		if (r != ncclInvalidUsage)
			return conf_fail(s, "returned %s (%d), not ncclInvalidUsage",
					 netapi_result_str(r), r);
		if (d != -7)
			return conf_fail(s, "wrote device %d on failure", d);
		if (s->api->devices(s->api, &after) != ncclSuccess || after != ndev)
			return conf_fail(s, "devices() went from %d to %d", ndev, after);
	}
	conf_step(s, "makeVDevice(one device)");
	r = s->api->make_vdevice(s->api, &d, 1, (const int[]){ ndev - 1 });
	if (r != ncclSuccess || d != ndev - 1)
		return conf_fail(s, "returned %s (%d), device %d; want the device itself (%d)",
				 netapi_result_str(r), r, d, ndev - 1);
	if (ndev < 2) {
		conf_log(s, "one device: nothing to fuse");
		return 0;
	}
	conf_step(s, "makeVDevice(0, 1)");
	r = s->api->make_vdevice(s->api, &d, 2, (const int[]){ 0, 1 });
	if (r == ncclInvalidUsage) {
		conf_log(s, "the backend does not fuse devices: ncclInvalidUsage, as it must say");
		return 0;
	}
	if (r != ncclSuccess || d != ndev)
		return conf_fail(s, "returned %s (%d), device %d (want %d)", netapi_result_str(r),
				 r, d, ndev);
	if (s->api->devices(s->api, &after) != ncclSuccess || after != ndev + 1)
		return conf_fail(s, "devices() is %d after fusing, want %d", after, ndev + 1);
	if (s->api->get_props(s->api, 0, &a) || s->api->get_props(s->api, 1, &b) ||
	    s->api->get_props(s->api, d, &f))
		return conf_fail(s, "getProperties failed");
	conf_log(s, "fused device %d: '%s', %d Mbps, vProps {%d: %d, %d}", d, f.name, f.speed,
		 f.vdev_ndevs, f.vdev_devs[0], f.vdev_devs[1]);
	if (f.vdev_ndevs != 2 || f.vdev_devs[0] != 0 || f.vdev_devs[1] != 1)
		return conf_fail(s, "vProps {%d: %d, %d}, want {2: 0, 1}", f.vdev_ndevs,
				 f.vdev_devs[0], f.vdev_devs[1]);
	if (f.speed != a.speed + b.speed)
		return conf_fail(s, "speed %d, want %d + %d", f.speed, a.speed, b.speed);
	char want[600];

	snprintf(want, sizeof(want), "%s+%s", a.name, b.name);
	if (strcmp(f.name, want))
		return conf_fail(s, "name '%s', want '%s'", f.name, want);
	return 0;
}
