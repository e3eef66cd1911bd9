// SPDX-License-Identifier: Apache-2.0
/*
 * braid stat --watch N: a report every N seconds with rates over the interval per
 * process, device and QP (a process new since the last report: since it started), like
 * iostat; with --json one compact document per report and line.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plugin/counters.h"
#include "tools/stat.h"
#include "tools/stat_json.h"

struct rate {
	double secs;
	bool since_start; /* a process new since the last report: from its start */
};

/* The same process in the previous scan (same file, same start), or NULL. */
static const struct ent *find_prev(const struct scan *prev, const struct ent *e)
{
	for (size_t i = 0; prev && i < prev->n; i++) {
		const struct ent *p = &prev->e[i];

		if (p->r && stat_ent_running(p) && !strcmp(p->name, e->name) &&
		    p->r->start_time_ns == e->r->start_time_ns)
			return p;
	}
	return NULL;
}

/* Per second; < 0 when the counter went back (a record reused): no rate. */
static double per_s(uint64_t cur, uint64_t prev, double secs)
{
	if (cur < prev || secs <= 0)
		return -1;
	return (double)(cur - prev) / secs;
}

static void print_rate(double v, double scale, int width)
{
	if (v < 0)
		printf(" %*s", width, "-");
	else
		printf(" %*.1f", width, v / scale);
}

static json_t *jrate(double v)
{
	return v < 0 ? json_null() : json_real(v);
}

static uint64_t delta(uint64_t cur, uint64_t prev)
{
	return cur >= prev ? cur - prev : 0;
}

static const struct braid_ctr_dev zero_dev;
static const struct braid_ctr_qp zero_qp;

static void watch_process(const struct ent *e, const struct ent *p, json_t *jprocs)
{
	const struct braid_ctr_region *r = e->r;
	const struct braid_ctr_fallback *fb = &r->fallback;
	struct rate rt = { .secs = p ? e->t_mono - p->t_mono : stat_uptime_s(e),
			   .since_start = !p };
	json_t *jo = NULL, *jdevs = NULL, *jqps = NULL;
	int idle = 0;

	if (jprocs) {
		jo = json_object();
		jdevs = json_array();
		stat_jset(jo, "file", json_string(e->name));
		stat_jset(jo, "pid", json_integer(e->pid));
		stat_jset(jo, "live", e->kind == ENT_LIVE ? json_true() : json_null());
		stat_jset(jo, "backend", json_string(fb->backend));
		stat_jset(jo, "provider", json_string(fb->provider));
		stat_jset(jo, "slow_path", json_boolean(fb->slow_path));
		stat_jset(jo, "since", json_string(rt.since_start ? "start" : "interval"));
		stat_jset(jo, "seconds", rt.secs > 0 ? json_real(rt.secs) : json_null());
	} else {
		printf("pid %d%s  %s %s%s\n", e->pid, fb->slow_path ? "  SLOW PATH" : "",
		       stat_backend_str(fb), fb->provider[0] ? fb->provider : "-",
		       rt.since_start ? "  (new: rates since it started)" : "");
		printf("  %-3s %-16s %10s %10s %10s %10s %7s %7s %9s %10s\n", "dev", "name",
		       "tx_MB/s", "rx_MB/s", "tx_msgs/s", "rx_msgs/s", "errors", "stalls",
		       "strangers", "slow_lanes");
	}
	for (uint32_t d = 0; d < r->ndevs; d++) {
		const struct braid_ctr_dev *c = &r->devs[d];
		const struct braid_ctr_dev *q = p && d < p->r->ndevs ? &p->r->devs[d] : &zero_dev;
		double tx = per_s(c->t.tx_bytes, q->t.tx_bytes, rt.secs);
		double rx = per_s(c->t.rx_bytes, q->t.rx_bytes, rt.secs);
		double txm = per_s(c->t.tx_msgs, q->t.tx_msgs, rt.secs);
		double rxm = per_s(c->t.rx_msgs, q->t.rx_msgs, rt.secs);

		if (jdevs) {
			json_t *o = json_object();

			stat_jset(o, "index", json_integer(d));
			stat_jset(o, "name", json_string(c->name));
			stat_jset(o, "tx_Bps", jrate(tx));
			stat_jset(o, "rx_Bps", jrate(rx));
			stat_jset(o, "tx_msgs_ps", jrate(txm));
			stat_jset(o, "rx_msgs_ps", jrate(rxm));
			stat_jset(o, "errors", stat_jint(delta(c->t.errors, q->t.errors)));
			stat_jset(o, "strangers", stat_jint(delta(c->strangers, q->strangers)));
			stat_jset(o, "slow_lanes", stat_jint(delta(c->slow_lanes, q->slow_lanes)));
			stat_jset(o, "stalls", stat_jint(delta(c->stalls, q->stalls)));
			json_array_append_new(jdevs, o);
			continue;
		}
		printf("  %-3u %-16s", d, c->name);
		print_rate(tx, 1e6, 10);
		print_rate(rx, 1e6, 10);
		print_rate(txm, 1, 10);
		print_rate(rxm, 1, 10);
		printf(" %7llu %7llu %9llu %10llu\n",
		       (unsigned long long)delta(c->t.errors, q->t.errors),
		       (unsigned long long)delta(c->stalls, q->stalls),
		       (unsigned long long)delta(c->strangers, q->strangers),
		       (unsigned long long)delta(c->slow_lanes, q->slow_lanes));
	}
	if (stat_qps_readable(e)) {
		bool header = false;

		if (jo)
			jqps = json_array();
		for (int k = 0; k < BRAID_CTR_MAX_QPS; k++) {
			const struct braid_ctr_qp *c = &r->qps[k];
			const struct braid_ctr_qp *q = &zero_qp;
			double tx, rx;

			if (!c->in_use)
				continue;
			/* the same QP in the last report; a new one counted from 0 */
			if (p && stat_qps_readable(p) && p->r->qps[k].in_use &&
			    p->r->qps[k].qpn == c->qpn && p->r->qps[k].dev == c->dev)
				q = &p->r->qps[k];
			tx = per_s(c->tx_bytes, q->tx_bytes, rt.secs);
			rx = per_s(c->rx_bytes, q->rx_bytes, rt.secs);
			if (tx == 0 && rx == 0 && c->errors == q->errors) {
				idle++;
				continue;
			}
			if (jqps) {
				json_t *o = json_object();

				stat_jset(o, "slot", json_integer(k));
				stat_jset(o, "dev", json_integer(c->dev));
				stat_jset(o, "qpn", json_integer(c->qpn));
				stat_jset(o, "tx_Bps", jrate(tx));
				stat_jset(o, "rx_Bps", jrate(rx));
				stat_jset(o, "errors", stat_jint(delta(c->errors, q->errors)));
				json_array_append_new(jqps, o);
				continue;
			}
			if (!header)
				printf("  %-4s %-3s %8s %10s %10s %7s\n", "qp", "dev", "qpn",
				       "tx_MB/s", "rx_MB/s", "errors");
			header = true;
			printf("  %-4d %-3d %#8x", k, (int)c->dev, c->qpn);
			print_rate(tx, 1e6, 10);
			print_rate(rx, 1e6, 10);
			printf(" %7llu\n", (unsigned long long)delta(c->errors, q->errors));
		}
		if (!jo && idle)
			printf("  (%d idle QP(s) not shown)\n", idle);
	}
	if (jo) {
		stat_jset(jo, "devices", jdevs);
		stat_jset(jo, "qps", jqps ? jqps : json_null());
		stat_jset(jo, "idle_qps", json_integer(idle));
		json_array_append_new(jprocs, jo);
	}
}

static void watch_report(const struct stat_opts *o, const struct scan *cur, const struct scan *prev,
			 long n, double interval)
{
	json_t *root = NULL, *procs = NULL;
	char t[32];
	int gone = 0;

	/* processes of the last report that are no longer running */
	for (size_t i = 0; i < prev->n; i++) {
		const struct ent *p = &prev->e[i];
		bool still = false;

		if (!stat_ent_running(p))
			continue;
		for (size_t j = 0; j < cur->n && !still; j++)
			still = stat_ent_running(&cur->e[j]) && find_prev(prev, &cur->e[j]) == p;
		gone += !still;
	}
	if (o->json) {
		root = stat_json_head(o);
		procs = json_array();
		stat_jset(root, "report", json_integer(n));
		stat_jset(root, "interval_s", json_real(interval));
	} else {
		stat_fmt_time(stat_real_now_ns(), t, sizeof(t));
		printf("report %ld  %s  interval %.2f s: %d running (%d on a slow path), %d "
		       "ended since the last report\n",
		       n, t, interval, cur->nlive + cur->nunknown, cur->nslow, gone);
	}
	for (size_t i = 0; i < cur->n; i++)
		if (stat_ent_running(&cur->e[i]))
			watch_process(&cur->e[i], find_prev(prev, &cur->e[i]), procs);
	if (root) {
		stat_jset(root, "processes", procs);
		stat_jset(root, "ended_since_last", json_integer(gone));
		stat_json_tail(root, cur);
		stat_json_print(root, JSON_COMPACT);
		return;
	}
	if (cur->nended || cur->nnotread)
		printf("(%d ended, %d file(s) not read: braid stat without --watch names them)\n",
		       cur->nended, cur->nnotread);
	printf("\n");
	fflush(stdout);
}

static void sleep_until(double t)
{
	for (;;) {
		double left = t - stat_mono_now();
		struct timespec ts;

		if (left <= 0)
			return;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

int stat_watch(const struct stat_opts *o)
{
	struct scan prev, cur;
	double next = stat_mono_now();

	if (stat_scan_dir(o, &prev))
		return 1;
	for (long n = 1; !o->count || n <= o->count; n++) {
		next += o->watch;
		sleep_until(next);
		if (stat_scan_dir(o, &cur)) {
			stat_scan_free(&prev);
			return 1;
		}
		watch_report(o, &cur, &prev, n, o->watch);
		stat_scan_free(&prev);
		prev = cur;
	}
	stat_scan_free(&prev);
	return 0;
}
