// SPDX-License-Identifier: Apache-2.0
/*
 * braid stat's listing for people: each running process (backend, slow path and why,
 * GPUDirect, devices, comms and their lanes, QPs), then the files of ended processes
 * and those not read. docs/stat.md says what each field means.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plugin/counters.h"
#include "tools/stat.h"

void stat_fmt_duration(double s, char *buf, size_t len)
{
	long v = (long)s;

	if (s < 0)
		snprintf(buf, len, "?");
	else if (v >= 86400)
		snprintf(buf, len, "%ldd%02ldh", v / 86400, v % 86400 / 3600);
	else if (v >= 3600)
		snprintf(buf, len, "%ldh%02ldm", v / 3600, v % 3600 / 60);
	else if (v >= 60)
		snprintf(buf, len, "%ldm%02lds", v / 60, v % 60);
	else
		snprintf(buf, len, "%lds", v);
}

void stat_fmt_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ULL);
	struct tm tm;

	if (!ns || !localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm))
		snprintf(buf, len, "?");
}

static double avg_mbps(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes / secs / 1e6 : 0;
}
/* ---- the listing, for people */

static void print_devices(const struct ent *e, double up)
{
	const struct braid_ctr_region *r = e->r;

	printf("  devices: %u\n", r->ndevs);
	if (!r->ndevs)
		return;
	printf("    %-3s %-16s %14s %14s %10s %10s %7s %7s %9s %10s %8s %8s  %s\n", "dev", "name",
	       "tx_bytes", "rx_bytes", "tx_msgs", "rx_msgs", "errors", "stalls", "strangers",
	       "slow_lanes", "avg_tx", "avg_rx", "port");
	for (uint32_t d = 0; d < r->ndevs; d++) {
		const struct braid_ctr_dev *v = &r->devs[d];

		printf("    %-3u %-16s %14llu %14llu %10llu %10llu %7llu %7llu %9llu %10llu %8.1f "
		       "%8.1f  %s\n",
		       d, v->name, (unsigned long long)v->t.tx_bytes,
		       (unsigned long long)v->t.rx_bytes, (unsigned long long)v->t.tx_msgs,
		       (unsigned long long)v->t.rx_msgs, (unsigned long long)v->t.errors,
		       (unsigned long long)v->stalls, (unsigned long long)v->strangers,
		       (unsigned long long)v->slow_lanes, avg_mbps(v->t.tx_bytes, up),
		       avg_mbps(v->t.rx_bytes, up), v->port_down ? "DOWN" : "up");
	}
	for (uint32_t d = 0; d < r->ndevs; d++)
		if (r->devs[d].provider[0] && strcmp(r->devs[d].provider, r->fallback.provider))
			printf("    dev %u provider: %s\n", d, r->devs[d].provider);
}

static void print_lanes(const struct braid_ctr_region *r, const struct braid_ctr_comm *c)
{
	uint32_t n = stat_comm_nlanes(c);
	uint64_t total = 0;

	for (uint32_t k = 0; k < n; k++)
		total += c->lanes[k].bytes;
	printf("         %-16s %14s %7s %7s %10s  %-4s  %-6s %9s %10s\n", "NIC", "bytes", "share",
	       "weight", "rate_MB/s", "slow", "state", "failovers", "recoveries");
	for (uint32_t k = 0; k < n; k++) {
		const struct braid_ctr_lane *l = &c->lanes[k];

		printf("         %-16s %14llu %6.1f%% %6.1f%% %10.1f  %-4s  %-6s %9u %10u\n",
		       stat_dev_name(r, l->dev), (unsigned long long)l->bytes,
		       total ? 100.0 * (double)l->bytes / (double)total : 0.0,
		       (double)l->weight_ppm / 1e4, (double)l->rate_bps / 1e6,
		       l->slow ? "SLOW" : "no", stat_lane_up(r, l) ? "up" : "DOWN", l->failovers,
		       l->recoveries);
	}
}

static void print_comms(const struct ent *e)
{
	const struct braid_ctr_region *r = e->r;
	int nsend = 0, nrecv = 0;

	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		nsend += r->comms[i].kind == BRAID_CTR_COMM_SEND;
		nrecv += r->comms[i].kind == BRAID_CTR_COMM_RECV;
	}
	printf("  comms: %d (%d send, %d recv)\n", nsend + nrecv, nsend, nrecv);
	if (!nsend && !nrecv)
		return;
	printf("    %-4s %-4s %-3s %-24s %14s %14s %10s %7s %5s\n", "slot", "kind", "dev", "peer",
	       "tx_bytes", "rx_bytes", "msgs", "errors", "nics");
	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];

		if (!stat_comm_used(c))
			continue;
		printf("    %-4d %-4s %-3d %-24s %14llu %14llu %10llu %7llu %5u\n", i,
		       stat_kind_name(c->kind), (int)c->dev, c->peer[0] ? c->peer : "?",
		       (unsigned long long)c->t.tx_bytes, (unsigned long long)c->t.rx_bytes,
		       (unsigned long long)(c->t.tx_msgs + c->t.rx_msgs),
		       (unsigned long long)c->t.errors, c->nlanes);
		if (stat_comm_nlanes(c) >= 2)
			print_lanes(r, c);
	}
}

static void print_qps(const struct ent *e, double up)
{
	const struct braid_ctr_region *r = e->r;
	int n = 0;

	if (e->qp_note[0]) {
		printf("  qps: %s\n", e->qp_note);
		return;
	}
	if (!stat_qps_readable(e)) {
		printf("  qps: none (the %s backend keeps no per-QP records)\n",
		       r->fallback.backend[0] ? r->fallback.backend : "chosen");
		return;
	}
	for (int q = 0; q < BRAID_CTR_MAX_QPS; q++)
		n += r->qps[q].in_use != 0;
	printf("  qps: %d\n", n);
	if (!n)
		return;
	printf("    %-4s %-3s %-16s %8s %8s %7s %5s %4s %14s %14s %7s %8s %8s\n", "slot", "dev",
	       "nic", "qpn", "remote", "flow", "sport", "comm", "tx_bytes", "rx_bytes", "errors",
	       "avg_tx", "avg_rx");
	for (int q = 0; q < BRAID_CTR_MAX_QPS; q++) {
		const struct braid_ctr_qp *p = &r->qps[q];

		if (!p->in_use)
			continue;
		printf("    %-4d %-3d %-16s %#8x %#8x %#7x %5u %4d %14llu %14llu %7llu %8.1f %8.1f\n",
		       q, (int)p->dev, stat_dev_name(r, p->dev), p->qpn, p->remote_qpn,
		       p->flow_label, p->sport, (int)p->comm, (unsigned long long)p->tx_bytes,
		       (unsigned long long)p->rx_bytes, (unsigned long long)p->errors,
		       avg_mbps(p->tx_bytes, up), avg_mbps(p->rx_bytes, up));
	}
}

/* Offered is not used: NCCL decides per GPU and NIC, and its registrations say which. */
static void print_gpudirect_used(const struct braid_ctr_fallback *fb)
{
	unsigned g = fb->recv_regs_gpu, h = fb->recv_regs_host;

	if (!g && !h) {
		printf("  GPUDirect used: not known yet (no receive buffer registered)\n");
		return;
	}
	printf("  GPUDirect used: %s (NCCL's receive buffers: %u in GPU memory, %u in host "
	       "memory%s)\n",
	       g               ? "yes"
	       : fb->gpudirect ? "NO, although offered"
			       : "no",
	       g, h,
	       !g && fb->gpudirect ? "; NCCL copies every message through host memory: see "
				     "NCCL_NET_GDR_LEVEL"
				   : "");
}

static void print_process(const struct ent *e)
{
	const struct braid_ctr_fallback *fb = &e->r->fallback;
	double up = stat_uptime_s(e);
	char dur[32];

	stat_fmt_duration(up, dur, sizeof(dur));
	printf("pid %d%s  %s, up %s  (%s)\n", e->pid, fb->slow_path ? "  SLOW PATH" : "",
	       e->kind == ENT_LIVE ? "live" : "liveness unknown (other PID namespace?)", dur,
	       e->path);
	printf("  liveness: %s\n", e->why);
	printf("  backend %s, provider %s%s\n", stat_backend_str(fb),
	       fb->provider[0] ? fb->provider : "-", fb->slow_path ? ": SLOW PATH" : "");
	printf("  why: %s\n", fb->why[0] ? fb->why : "-");
	printf("  GPUDirect RDMA %s (mode %s)%s%s\n", fb->gpudirect ? "on" : "off",
	       fb->gpudirect_mode[0] ? fb->gpudirect_mode : "?", fb->gpudirect_why[0] ? ": " : "",
	       fb->gpudirect_why);
	print_gpudirect_used(fb);
	if (fb->link_layer[0])
		printf("  link: %s, GID index %d (%s), MTU %d\n", fb->link_layer,
		       (int)fb->gid_index, fb->gid_type[0] ? fb->gid_type : "?", (int)fb->mtu);
	print_devices(e, up);
	print_comms(e);
	print_qps(e, up);
	printf("  (avg_tx, avg_rx: MB/s since the process started; --watch N for current rates)\n");
}

void stat_print_listing(const struct stat_opts *o, const struct scan *s)
{
	bool header = false;

	printf("braid stat: %s: %d running braid process(es) (%d on a slow path%s), %d ended, "
	       "%d file(s) not read\n",
	       o->dir, s->nlive + s->nunknown, s->nslow,
	       s->nunknown ? ", some of unknown liveness" : "", s->nended, s->nnotread);
	for (size_t i = 0; i < s->n; i++)
		if (stat_ent_running(&s->e[i])) {
			printf("\n");
			print_process(&s->e[i]);
		}
	for (size_t i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];
		const struct braid_ctr_fallback *fb;
		char t[32];

		if (e->kind != ENT_ENDED)
			continue;
		if (!header)
			printf("\nended (the next braid process of the same user removes these):\n");
		header = true;
		fb = &e->r->fallback;
		stat_fmt_time(e->r->start_time_ns, t, sizeof(t));
		printf("  %s: pid %d, backend %s, provider %s, started %s: %s\n", e->path, e->pid,
		       stat_backend_str(fb), fb->provider[0] ? fb->provider : "-", t, e->why);
	}
	header = false;
	for (size_t i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];

		if (e->kind != ENT_VERSION && e->kind != ENT_BAD && e->kind != ENT_HIDDEN)
			continue;
		if (!header)
			printf("\nnot read:\n");
		header = true;
		printf("  %s: %s%s\n", e->path, e->why,
		       !e->lock_known ? ""
		       : e->lock_held ? " (its process runs)"
				      : " (no process holds it)");
	}
}
