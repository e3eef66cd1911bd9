// SPDX-License-Identifier: Apache-2.0
/*
 * braid stat --json: one document per listing (and, for --watch, the head and tail each
 * report shares). The members are listed in docs/stat.md; "braid_stat" is the schema.
 */
#include "tools/stat_json.h"

#include <stdint.h>
#include <stdio.h>

#include "plugin/counters.h"

#define STAT_SCHEMA 1 /* the JSON documents' "braid_stat" member */

json_t *stat_jint(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

void stat_jset(json_t *o, const char *key, json_t *v)
{
	(void)json_object_set_new(o, key, v); /* takes v, frees it on failure */
}

static void jtraffic(json_t *o, const struct braid_ctr_traffic *t)
{
	stat_jset(o, "tx_bytes", stat_jint(t->tx_bytes));
	stat_jset(o, "tx_msgs", stat_jint(t->tx_msgs));
	stat_jset(o, "rx_bytes", stat_jint(t->rx_bytes));
	stat_jset(o, "rx_msgs", stat_jint(t->rx_msgs));
	stat_jset(o, "completions", stat_jint(t->completions));
	stat_jset(o, "errors", stat_jint(t->errors));
}

static json_t *json_not_read(const struct ent *e)
{
	json_t *o = json_object();

	stat_jset(o, "file", json_string(e->name));
	stat_jset(o, "path", json_string(e->path));
	stat_jset(o, "pid", json_integer(e->pid));
	stat_jset(o, "reason", json_string(e->reason));
	if (e->kind == ENT_VERSION) {
		stat_jset(o, "version", json_integer(e->version));
		stat_jset(o, "reads_version", json_integer(BRAID_CTR_VERSION));
	}
	stat_jset(o, "running", e->lock_known ? json_boolean(e->lock_held) : json_null());
	stat_jset(o, "message", json_string(e->why));
	return o;
}

static json_t *json_devices(const struct braid_ctr_region *r)
{
	json_t *a = json_array();

	for (uint32_t d = 0; d < r->ndevs; d++) {
		const struct braid_ctr_dev *v = &r->devs[d];
		json_t *o = json_object();

		stat_jset(o, "index", json_integer(d));
		stat_jset(o, "name", json_string(v->name));
		stat_jset(o, "provider", json_string(v->provider));
		stat_jset(o, "in_use", json_integer(v->in_use));
		jtraffic(o, &v->t);
		stat_jset(o, "av_entries", stat_jint(v->av_entries));
		stat_jset(o, "strangers", stat_jint(v->strangers));
		stat_jset(o, "slow_lanes", stat_jint(v->slow_lanes));
		stat_jset(o, "stalls", stat_jint(v->stalls));
		stat_jset(o, "port_down", json_boolean(v->port_down));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *json_comms(const struct braid_ctr_region *r)
{
	json_t *a = json_array();

	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];
		json_t *o, *lanes;
		uint64_t total = 0;

		if (!stat_comm_used(c))
			continue;
		o = json_object();
		lanes = json_array();
		stat_jset(o, "slot", json_integer(i));
		stat_jset(o, "kind", json_string(stat_kind_name(c->kind)));
		stat_jset(o, "dev", json_integer(c->dev));
		stat_jset(o, "peer", json_string(c->peer));
		jtraffic(o, &c->t);
		stat_jset(o, "nlanes", json_integer(c->nlanes));
		stat_jset(o, "failovers", json_integer(c->failovers));
		stat_jset(o, "recoveries", json_integer(c->recoveries));
		for (uint32_t k = 0; k < stat_comm_nlanes(c); k++)
			total += c->lanes[k].bytes;
		for (uint32_t k = 0; k < stat_comm_nlanes(c) && c->nlanes >= 2; k++) {
			const struct braid_ctr_lane *l = &c->lanes[k];
			json_t *lo = json_object();

			stat_jset(lo, "dev", json_integer(l->dev));
			stat_jset(lo, "name", json_string(stat_dev_name(r, l->dev)));
			stat_jset(lo, "bytes", stat_jint(l->bytes));
			stat_jset(lo, "chunks", stat_jint(l->chunks));
			stat_jset(lo, "share",
				  json_real(total ? (double)l->bytes / (double)total : 0.0));
			stat_jset(lo, "weight", json_real((double)l->weight_ppm / 1e6));
			stat_jset(lo, "rate_Bps", stat_jint(l->rate_bps));
			stat_jset(lo, "slow", json_boolean(l->slow));
			stat_jset(lo, "up", json_boolean(stat_lane_up(r, l)));
			stat_jset(lo, "failovers", json_integer(l->failovers));
			stat_jset(lo, "recoveries", json_integer(l->recoveries));
			json_array_append_new(lanes, lo);
		}
		stat_jset(o, "lanes", lanes);
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *json_qps(const struct ent *e)
{
	const struct braid_ctr_region *r = e->r;
	json_t *a;

	if (!stat_qps_readable(e))
		return json_null();
	a = json_array();
	for (int q = 0; q < BRAID_CTR_MAX_QPS; q++) {
		const struct braid_ctr_qp *p = &r->qps[q];
		json_t *o;

		if (!p->in_use)
			continue;
		o = json_object();
		stat_jset(o, "slot", json_integer(q));
		stat_jset(o, "dev", json_integer(p->dev));
		stat_jset(o, "comm", json_integer(p->comm));
		stat_jset(o, "qpn", json_integer(p->qpn));
		stat_jset(o, "remote_qpn", json_integer(p->remote_qpn));
		stat_jset(o, "flow_label", json_integer(p->flow_label));
		stat_jset(o, "sport", json_integer(p->sport));
		stat_jset(o, "tx_bytes", stat_jint(p->tx_bytes));
		stat_jset(o, "tx_msgs", stat_jint(p->tx_msgs));
		stat_jset(o, "rx_bytes", stat_jint(p->rx_bytes));
		stat_jset(o, "rx_msgs", stat_jint(p->rx_msgs));
		stat_jset(o, "errors", stat_jint(p->errors));
		json_array_append_new(a, o);
	}
	return a;
}

static const char *ns_name(enum owner_ns ns)
{
	return ns == NS_THIS ? "this" : ns == NS_OTHER ? "other" : "unknown";
}

static json_t *json_process(const struct ent *e)
{
	const struct braid_ctr_region *r = e->r;
	const struct braid_ctr_fallback *fb = &r->fallback;
	json_t *o = json_object(), *g = json_object();
	double up = stat_uptime_s(e);

	stat_jset(o, "file", json_string(e->name));
	stat_jset(o, "path", json_string(e->path));
	stat_jset(o, "pid", json_integer(e->pid));
	stat_jset(o, "live",
		  e->kind == ENT_UNKNOWN ? json_null() : json_boolean(e->kind == ENT_LIVE));
	stat_jset(o, "liveness", json_string(e->why));
	stat_jset(o, "pid_namespace", json_string(ns_name(e->ns)));
	stat_jset(o, "start_time_ns", stat_jint(r->start_time_ns));
	stat_jset(o, "uptime_s", up < 0 ? json_null() : json_real(up));
	stat_jset(o, "backend", json_string(fb->backend));
	stat_jset(o, "provider", json_string(fb->provider));
	stat_jset(o, "slow_path", json_boolean(fb->slow_path));
	stat_jset(o, "why", json_string(fb->why));
	stat_jset(g, "on", json_boolean(fb->gpudirect));
	stat_jset(g, "mode", json_string(fb->gpudirect_mode));
	stat_jset(g, "why", json_string(fb->gpudirect_why));
	stat_jset(g, "recv_regs_gpu", json_integer(fb->recv_regs_gpu));
	stat_jset(g, "recv_regs_host", json_integer(fb->recv_regs_host));
	stat_jset(g, "used",
		  fb->recv_regs_gpu    ? json_true()
		  : fb->recv_regs_host ? json_false()
				       : json_null());
	stat_jset(o, "gpudirect", g);
	stat_jset(o, "link_layer", json_string(fb->link_layer));
	stat_jset(o, "gid_index", json_integer(fb->gid_index));
	stat_jset(o, "gid_type", json_string(fb->gid_type));
	stat_jset(o, "mtu", json_integer(fb->mtu));
	stat_jset(o, "devices", json_devices(r));
	stat_jset(o, "comms", json_comms(r));
	stat_jset(o, "qps", json_qps(e));
	if (e->qp_note[0])
		stat_jset(o, "qps_note", json_string(e->qp_note));
	return o;
}

json_t *stat_json_head(const struct stat_opts *o)
{
	json_t *root = json_object();

	stat_jset(root, "braid_stat", json_integer(STAT_SCHEMA));
	stat_jset(root, "layout_version", json_integer(BRAID_CTR_VERSION));
	stat_jset(root, "dir", json_string(o->dir));
	stat_jset(root, "time_ns", stat_jint(stat_real_now_ns()));
	return root;
}

void stat_json_tail(json_t *root, const struct scan *s)
{
	json_t *ended = json_array(), *nr = json_array();

	for (size_t i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];

		if (e->kind == ENT_ENDED) {
			json_t *x = json_object();

			stat_jset(x, "file", json_string(e->name));
			stat_jset(x, "path", json_string(e->path));
			stat_jset(x, "pid", json_integer(e->pid));
			stat_jset(x, "start_time_ns", stat_jint(e->r->start_time_ns));
			stat_jset(x, "backend", json_string(e->r->fallback.backend));
			stat_jset(x, "provider", json_string(e->r->fallback.provider));
			stat_jset(x, "message", json_string(e->why));
			json_array_append_new(ended, x);
		} else if (!stat_ent_running(e)) {
			json_array_append_new(nr, json_not_read(e));
		}
	}
	stat_jset(root, "ended", ended);
	stat_jset(root, "not_read", nr);
}

int stat_json_print(json_t *root, size_t flags)
{
	int rc = json_dumpf(root, stdout, flags);

	json_decref(root);
	putchar('\n');
	fflush(stdout);
	return rc;
}

int stat_json_listing(const struct stat_opts *o, const struct scan *s)
{
	json_t *root = stat_json_head(o), *procs = json_array();

	for (size_t i = 0; i < s->n; i++)
		if (stat_ent_running(&s->e[i]))
			json_array_append_new(procs, json_process(&s->e[i]));
	stat_jset(root, "processes", procs);
	stat_json_tail(root, s);
	return stat_json_print(root, JSON_INDENT(2));
}
