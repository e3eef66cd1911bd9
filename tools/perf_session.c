// SPDX-License-Identifier: Apache-2.0
/*
 * One side of a `braid perf` run: agree on the options with the peer over the bootstrap
 * socket, load and initialise the plugin, connect (listen/connect/accept polled, as NCCL
 * does), register the buffers, print the header and each device's lanes, run the
 * phases, tear down.
 */
#include "tools/cmds.h"
#include "tools/perf.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/counters.h"
#include "tools/bootstrap.h"
#include "tools/ctr_self.h"

/* ---- set-up and tear-down ---- */

#define PERF_WIRE_MAGIC 0x62726166u /* "braf" */
#define PERF_WIRE_PROTO 1

/*
 * What both sides must agree on; sent over the bootstrap socket and compared with memcmp,
 * so without implicit padding (pad: 0 through the initializer; the compiler's padding
 * bytes are whatever was on the stack, at -O0 at least).
 */
struct perf_wire {
	uint32_t magic, proto;
	int32_t api, window, iters, warmup, lat_iters, bw, lat, pad;
	uint64_t min, max, lat_size;
};

static int exchange_opts(struct perf *p, char *err, size_t errlen)
{
	struct perf_wire mine = {
		.magic = PERF_WIRE_MAGIC, .proto = PERF_WIRE_PROTO, .api = p->o.api,
		.window = p->o.window, .iters = p->o.iters, .warmup = p->o.warmup,
		.lat_iters = p->o.lat_iters, .bw = p->o.bw, .lat = p->o.lat, .min = p->o.min,
		.max = p->o.max, .lat_size = p->o.lat_size,
	}, peer;

	if (boot_send(p->boot, &mine, sizeof(mine), p->o.timeout, err, errlen) ||
	    boot_recv(p->boot, &peer, sizeof(peer), p->o.timeout, err, errlen))
		return -1;
	if (peer.magic != PERF_WIRE_MAGIC || peer.proto != PERF_WIRE_PROTO) {
		snprintf(err, errlen, "the peer is not braid perf (or another version of it)");
		return -1;
	}
	if (memcmp(&mine, &peer, sizeof(mine))) {
		snprintf(err, errlen,
			 "the two sides were given different options (api, sizes, "
			 "window, iterations or --bw-only/--lat-only must match)");
		return -1;
	}
	return 0;
}

static int setup_plugin(struct perf *p, char *loaded, size_t loaded_len)
{
	char plugin[PATH_MAX], err[2048];
	void *dl;
	int ndev = 0;

	if (p->o.plugin)
		snprintf(plugin, sizeof(plugin), "%s", p->o.plugin);
	else
		braid_default_plugin(plugin, sizeof(plugin));
	dl = netapi_open(plugin, loaded, loaded_len, err, sizeof(err));
	if (!dl)
		return perf_err(p, "cannot load the plugin: %s", err);
	if (netapi_bind(dl, p->o.api, &p->api))
		return perf_err(p, "%s exports no ncclNetPlugin_v%d", loaded, p->o.api);
	if (perf_check_call(p, p->api.init(&p->api, &p->ctx, (uint64_t)getpid()), "init") ||
	    perf_check_call(p, p->api.devices(&p->api, &ndev), "devices"))
		return -1;
	if (p->o.dev < 0 || p->o.dev >= ndev)
		return perf_err(p, "--dev %d: the plugin has %d device%s", p->o.dev, ndev,
				ndev == 1 ? "" : "s");
	return perf_check_call(p, p->api.get_props(&p->api, p->o.dev, &p->props), "getProperties");
}

static int connect_peer(struct perf *p)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE] = { 0 }, peer[NCCL_NET_HANDLE_MAXSIZE], err[512];
	double deadline;

	if (perf_check_call(p, p->api.listen(&p->api, p->ctx, p->o.dev, mine, &p->lc), "listen"))
		return -1;
	if (boot_send(p->boot, mine, sizeof(mine), p->o.timeout, err, sizeof(err)) ||
	    boot_recv(p->boot, peer, sizeof(peer), p->o.timeout, err, sizeof(err)))
		return perf_err(p, "handle exchange: %s", err);
	deadline = perf_now_us() + PERF_CONNECT_TIMEOUT_S * 1e6;
	while (!p->sc || !p->rc) {
		if (!p->sc &&
		    perf_check_call(p, p->api.connect(&p->api, p->ctx, p->o.dev, peer, &p->sc),
				    "connect"))
			return -1;
		if (!p->rc && perf_check_call(p, p->api.accept(&p->api, p->lc, &p->rc), "accept"))
			return -1;
		if (perf_now_us() > deadline)
			return perf_err(p,
					"connect/accept not ready after %.0f s (send comm %s, "
					"receive comm %s)",
					PERF_CONNECT_TIMEOUT_S, p->sc ? "up" : "pending",
					p->rc ? "up" : "pending");
		perf_sleep_us(100);
	}
	return 0;
}

static int setup_buffers(struct perf *p)
{
	size_t big = 3 * (p->o.bw ? p->o.max : 0) + 64;

	p->small_len = (p->o.lat_size > PERF_CTRL_BYTES ? p->o.lat_size : PERF_CTRL_BYTES) + 64;
	p->big = aligned_alloc(4096, (big + 4095) & ~(size_t)4095);
	p->ssmall = aligned_alloc(64, (p->small_len + 63) & ~(size_t)63);
	p->rsmall = aligned_alloc(64, (p->small_len + 63) & ~(size_t)63);
	if (!p->big || !p->ssmall || !p->rsmall)
		return perf_err(p, "out of memory for %zu-byte buffers", big);
	memset(p->big, 0, big);
	memset(p->ssmall, 0, p->small_len);
	memset(p->rsmall, 0, p->small_len);
	/* registered once, as NCCL does with its buffers */
	if (perf_check_call(p,
			    p->api.reg_mr(&p->api, p->streamer ? p->sc : p->rc, p->big, big,
					  &p->big_mh),
			    "regMr(stream buffers)") ||
	    perf_check_call(p,
			    p->api.reg_mr(&p->api, p->sc, p->ssmall, p->small_len, &p->ssmall_mh),
			    "regMr(small send buffer)") ||
	    perf_check_call(p,
			    p->api.reg_mr(&p->api, p->rc, p->rsmall, p->small_len, &p->rsmall_mh),
			    "regMr(small receive buffer)"))
		return -1;
	return 0;
}

static void teardown(struct perf *p)
{
	if (p->big_mh)
		p->api.dereg_mr(&p->api, p->streamer ? p->sc : p->rc, p->big_mh);
	if (p->ssmall_mh)
		p->api.dereg_mr(&p->api, p->sc, p->ssmall_mh);
	if (p->rsmall_mh)
		p->api.dereg_mr(&p->api, p->rc, p->rsmall_mh);
	if (p->sc)
		p->api.close_send(&p->api, p->sc);
	if (p->rc)
		p->api.close_recv(&p->api, p->rc);
	if (p->lc)
		p->api.close_listen(&p->api, p->lc);
	if (p->api.finalize)
		p->api.finalize(&p->api, p->ctx);
	free(p->big);
	free(p->ssmall);
	free(p->rsmall);
}

static void print_header(const struct perf *p, const char *loaded)
{
	const char *backend = getenv("BRAID_BACKEND"), *prov = getenv("BRAID_OFI_PROVIDER");

	printf("# braid perf %s: plugin %s (name \"%s\", ncclNetPlugin_v%d)\n", BRAID_VERSION,
	       loaded, p->api.name, p->o.api);
	printf("# device %d: %s, %d Mbps; BRAID_BACKEND=%s BRAID_OFI_PROVIDER=%s\n", p->o.dev,
	       p->props.name, p->props.speed, backend ? backend : "(unset)",
	       prov ? prov : "(unset)");
	printf("# peer: %s; window %d requests; first and last timed iteration of each size "
	       "verified\n",
	       p->o.mode == MODE_LOCAL ? "a second local process" : "remote", p->o.window);
	fflush(stdout);
}

/*
 * What striping did, from the plugin's own counters (/dev/shm/braid-<pid>, this process):
 * for each NIC of the send comm of a fused device, the bytes and chunks it carried, its
 * share and its measured rate. Nothing when the device is one NIC or counters are off.
 */
static void print_lanes(void)
{
	const struct braid_ctr_region *r;
	char why[160];
	int rc = ctr_self_map(&r, why, sizeof(why));

	if (rc) {
		if (rc != -ENOENT) /* no file: counters off, nothing to say */
			printf("# per-NIC counters: %s\n", why);
		return;
	}
	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];

		if (c->kind != BRAID_CTR_COMM_SEND || c->nlanes < 2)
			continue;
		printf("# send comm to %s: %u NICs\n", c->peer, c->nlanes);
		printf("#   %-16s %14s %10s %8s %12s  %s\n", "NIC", "bytes", "chunks", "share",
		       "rate(GB/s)", "slow");
		for (uint32_t k = 0; k < c->nlanes && k < BRAID_CTR_MAX_LANES; k++) {
			const struct braid_ctr_lane *l = &c->lanes[k];
			const char *name = l->dev >= 0 && l->dev < BRAID_CTR_MAX_DEVS
						   ? r->devs[l->dev].name
						   : "?";

			printf("#   %-16s %14llu %10llu %7.1f%% %12.3f  %s\n", name,
			       (unsigned long long)l->bytes, (unsigned long long)l->chunks,
			       l->weight_ppm / 1e4, (double)l->rate_bps / 1e9,
			       l->slow ? "yes" : "no");
		}
	}
	ctr_self_unmap(r);
}

/* The whole measurement on an established bootstrap socket. */
int perf_run_session(struct perf *p)
{
	char loaded[PATH_MAX], err[512];
	bool all_ok = true;
	int rc = -1;
	char done = 0;

	if (exchange_opts(p, err, sizeof(err)))
		return perf_err(p, "%s", err);
	if (setup_plugin(p, loaded, sizeof(loaded)) || connect_peer(p) || setup_buffers(p))
		goto out;
	if (p->streamer)
		print_header(p, loaded);
	if (p->o.bw && perf_run_bandwidth(p, &all_ok))
		goto out;
	if (p->streamer && p->o.bw)
		print_lanes();
	if (p->o.lat && perf_run_latency(p, &all_ok))
		goto out;
	/* both sides are done with the comms before either closes them */
	if (boot_send(p->boot, &done, 1, 30, err, sizeof(err)) ||
	    boot_recv(p->boot, &done, 1, 30, err, sizeof(err))) {
		perf_err(p, "final handshake: %s", err);
		goto out;
	}
	if (p->streamer)
		printf("# data check: %s\n", all_ok ? "every verified iteration was right"
						    : "WRONG DATA (see the errors above)");
	rc = all_ok ? 0 : -1;
out:
	teardown(p);
	return rc;
}
