// SPDX-License-Identifier: Apache-2.0
/*
 * The counters of every running braid process of the host in Prometheus' text exposition
 * format (version 0.0.4), which `braid stat --serve` and `braid stat --textfile` export
 * (tools/stat_prom_export.c). docs/stat.md lists every metric.
 *
 * Names follow Prometheus' conventions: base units (bytes, seconds), _total on counters, a
 * HELP and a TYPE line per family, label values escaped (backslash, double quote, newline).
 */
#include "tools/stat.h"

/* A label value: backslash, double quote and newline escaped, as the format asks. */
static void put_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			fputs("\\\\", f);
		else if (*v == '"')
			fputs("\\\"", f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

struct label {
	const char *name, *value;
};

/* A sample's labels after the pid: { "name", value } pairs. */
#define LABELS(...) ((const struct label[]){ __VA_ARGS__, { NULL, NULL } })
#define NO_LABELS ((const struct label[]){ { NULL, NULL } })

/* One sample: NAME{pid="..",name="value",...} VALUE. */
static void sample(FILE *f, const char *name, int pid, const char *value, const struct label *l)
{
	fprintf(f, "%s{pid=\"%d\"", name, pid);
	for (; l->name; l++) {
		fprintf(f, ",%s=\"", l->name);
		put_value(f, l->value);
		fputc('"', f);
	}
	fprintf(f, "} %s\n", value);
}

static const char *u64(char *buf, size_t len, uint64_t v)
{
	snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

#define U64(v) u64(num, sizeof(num), (v))
#define INT(v) u64(num, sizeof(num), (uint64_t)(v))

/* Each family is written by one function, for one process. */
struct family;
typedef void (*family_fn)(FILE *f, const struct ent *e, const struct family *fm);

struct family {
	const char *name, *type, *help;
	family_fn fn;
	int field; /* fam_dev's enum dev_field, fam_lane's enum lane_field */
};

static void fam_up(FILE *f, const struct ent *e, const struct family *fm)
{
	sample(f, fm->name, e->pid, "1", NO_LABELS);
}

static void fam_start(FILE *f, const struct ent *e, const struct family *fm)
{
	char num[48];
	uint64_t ns = e->r->start_time_ns;

	snprintf(num, sizeof(num), "%llu.%09llu", (unsigned long long)(ns / 1000000000ULL),
		 (unsigned long long)(ns % 1000000000ULL));
	sample(f, fm->name, e->pid, num, NO_LABELS);
}

static void fam_slow_path(FILE *f, const struct ent *e, const struct family *fm)
{
	const struct braid_ctr_fallback *fb = &e->r->fallback;

	sample(f, fm->name, e->pid, fb->slow_path ? "1" : "0",
	       LABELS({ "backend", fb->backend }, { "provider", fb->provider },
		      { "reason", fb->why }));
}

static void fam_gpudirect(FILE *f, const struct ent *e, const struct family *fm)
{
	const struct braid_ctr_fallback *fb = &e->r->fallback;

	sample(f, fm->name, e->pid, fb->gpudirect ? "1" : "0",
	       LABELS({ "mode", fb->gpudirect_mode }, { "reason", fb->gpudirect_why }));
}

static void fam_gpudirect_regs(FILE *f, const struct ent *e, const struct family *fm)
{
	const struct braid_ctr_fallback *fb = &e->r->fallback;
	char num[24];

	sample(f, fm->name, e->pid, INT(fb->recv_regs_gpu), LABELS({ "memory", "gpu" }));
	sample(f, fm->name, e->pid, INT(fb->recv_regs_host), LABELS({ "memory", "host" }));
}

/* No sample until NCCL registered a receive buffer: not known yet. */
static void fam_gpudirect_used(FILE *f, const struct ent *e, const struct family *fm)
{
	const struct braid_ctr_fallback *fb = &e->r->fallback;

	if (fb->recv_regs_gpu || fb->recv_regs_host)
		sample(f, fm->name, e->pid, fb->recv_regs_gpu ? "1" : "0", NO_LABELS);
}

static void fam_comms(FILE *f, const struct ent *e, const struct family *fm)
{
	char num[24];
	int n[3] = { 0, 0, 0 };

	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++)
		if (stat_comm_used(&e->r->comms[i]))
			n[e->r->comms[i].kind]++;
	sample(f, fm->name, e->pid, INT(n[BRAID_CTR_COMM_SEND]), LABELS({ "kind", "send" }));
	sample(f, fm->name, e->pid, INT(n[BRAID_CTR_COMM_RECV]), LABELS({ "kind", "recv" }));
}

enum dev_field {
	DEV_TX_BYTES,
	DEV_RX_BYTES,
	DEV_TX_MSGS,
	DEV_RX_MSGS,
	DEV_COMPLETIONS,
	DEV_ERRORS,
	DEV_STRANGERS,
	DEV_SLOW_LANES,
	DEV_STALLS,
	DEV_AV_ENTRIES,
};

static uint64_t dev_field(const struct braid_ctr_dev *v, enum dev_field what)
{
	switch (what) {
	case DEV_TX_BYTES: return v->t.tx_bytes;
	case DEV_RX_BYTES: return v->t.rx_bytes;
	case DEV_TX_MSGS: return v->t.tx_msgs;
	case DEV_RX_MSGS: return v->t.rx_msgs;
	case DEV_COMPLETIONS: return v->t.completions;
	case DEV_ERRORS: return v->t.errors;
	case DEV_STRANGERS: return v->strangers;
	case DEV_SLOW_LANES: return v->slow_lanes;
	case DEV_STALLS: return v->stalls;
	case DEV_AV_ENTRIES: return v->av_entries;
	}
	return 0;
}

/* One sample per device: dev (its index) and nic (its name), direction when not NULL. */
static void devs(FILE *f, const struct ent *e, const char *name, enum dev_field what,
		 const char *direction)
{
	for (uint32_t d = 0; d < e->r->ndevs; d++) {
		const struct braid_ctr_dev *v = &e->r->devs[d];
		char num[24], idx[16];

		snprintf(idx, sizeof(idx), "%u", d);
		U64(dev_field(v, what));
		if (direction)
			sample(f, name, e->pid, num,
			       LABELS({ "dev", idx }, { "nic", v->name },
				      { "direction", direction }));
		else
			sample(f, name, e->pid, num, LABELS({ "dev", idx }, { "nic", v->name }));
	}
}

static void fam_dev(FILE *f, const struct ent *e, const struct family *fm)
{
	devs(f, e, fm->name, fm->field, NULL);
}

static void fam_bytes(FILE *f, const struct ent *e, const struct family *fm)
{
	devs(f, e, fm->name, DEV_TX_BYTES, "tx");
	devs(f, e, fm->name, DEV_RX_BYTES, "rx");
}

static void fam_msgs(FILE *f, const struct ent *e, const struct family *fm)
{
	devs(f, e, fm->name, DEV_TX_MSGS, "tx");
	devs(f, e, fm->name, DEV_RX_MSGS, "rx");
}

/* 1 when a lane of a comm on the NIC is flagged slow now. */
static void fam_nic_slow(FILE *f, const struct ent *e, const struct family *fm)
{
	for (uint32_t d = 0; d < e->r->ndevs; d++) {
		char idx[16];
		bool slow = false;

		snprintf(idx, sizeof(idx), "%u", d);

		for (int i = 0; i < BRAID_CTR_MAX_COMMS && !slow; i++) {
			const struct braid_ctr_comm *c = &e->r->comms[i];

			for (uint32_t k = 0; stat_comm_used(c) && k < stat_comm_nlanes(c); k++)
				slow |= c->lanes[k].dev == (int32_t)d && c->lanes[k].slow;
		}
		sample(f, fm->name, e->pid, slow ? "1" : "0",
		       LABELS({ "dev", idx }, { "nic", e->r->devs[d].name }));
	}
}

static void fam_qps(FILE *f, const struct ent *e, const struct family *fm)
{
	if (!stat_qps_readable(e))
		return;
	for (uint32_t d = 0; d < e->r->ndevs; d++) {
		char num[24], idx[16];
		int n = 0;

		snprintf(idx, sizeof(idx), "%u", d);

		for (int q = 0; q < BRAID_CTR_MAX_QPS; q++)
			n += e->r->qps[q].in_use && e->r->qps[q].dev == (int32_t)d;
		sample(f, fm->name, e->pid, INT(n),
		       LABELS({ "dev", idx }, { "nic", e->r->devs[d].name }));
	}
}

enum lane_field {
	LANE_BYTES,
	LANE_CHUNKS,
	LANE_RATE,
	LANE_WEIGHT,
	LANE_SLOW,
	LANE_UP,
	LANE_FAILOVERS,
	LANE_RECOVERIES
};

/* Lanes: each NIC of a comm that stripes over two or more (a fused device). */
static void lanes(FILE *f, const struct ent *e, const char *name, enum lane_field what)
{
	const struct braid_ctr_region *r = e->r;

	for (int i = 0; i < BRAID_CTR_MAX_COMMS; i++) {
		const struct braid_ctr_comm *c = &r->comms[i];
		char slot[16], idx[16], num[48];

		if (!stat_comm_used(c) || stat_comm_nlanes(c) < 2)
			continue;
		snprintf(slot, sizeof(slot), "%d", i);
		for (uint32_t k = 0; k < stat_comm_nlanes(c); k++) {
			const struct braid_ctr_lane *l = &c->lanes[k];

			snprintf(idx, sizeof(idx), "%d", (int)l->dev);
			switch (what) {
			case LANE_BYTES: U64(l->bytes); break;
			case LANE_CHUNKS: U64(l->chunks); break;
			case LANE_RATE: U64(l->rate_bps); break;
			case LANE_WEIGHT:
				snprintf(num, sizeof(num), "%.6f", (double)l->weight_ppm / 1e6);
				break;
			case LANE_SLOW: snprintf(num, sizeof(num), "%d", l->slow ? 1 : 0); break;
			case LANE_FAILOVERS: U64(l->failovers); break;
			case LANE_RECOVERIES: U64(l->recoveries); break;
			case LANE_UP:
				snprintf(num, sizeof(num), "%d", stat_lane_up(r, l) ? 1 : 0);
				break;
			}
			sample(f, name, e->pid, num,
			       LABELS({ "comm", slot }, { "peer", c->peer }, { "dev", idx },
				      { "nic", stat_dev_name(r, l->dev) }));
		}
	}
}

static void fam_lane(FILE *f, const struct ent *e, const struct family *fm)
{
	lanes(f, e, fm->name, fm->field);
}

static const struct family families[] = {
	{ "braid_up", "gauge",
	  "1 for each running braid process (its counters file's lock is held).", fam_up, 0 },
	{ "braid_process_start_time_seconds", "gauge",
	  "When the process opened its counters, seconds since the Unix epoch.", fam_start, 0 },
	{ "braid_slow_path", "gauge",
	  "1 when the backend runs on a provider it considers slow (tcp, sockets, shm); "
	  "reason: why this backend and provider.",
	  fam_slow_path, 0 },
	{ "braid_gpudirect", "gauge",
	  "1 when NCCL uses GPUDirect RDMA with every device; mode peermem, dma-buf or none.",
	  fam_gpudirect, 0 },
	{ "braid_gpudirect_recv_regs_total", "counter",
	  "Receive buffers NCCL registered, by memory (gpu, host): GPUDirect RDMA is used "
	  "where they are in GPU memory.",
	  fam_gpudirect_regs, 0 },
	{ "braid_gpudirect_used", "gauge",
	  "1 when NCCL registered receive buffers in GPU memory (GPUDirect RDMA used), 0 when "
	  "only in host memory (it copies through host memory); no sample before the first.",
	  fam_gpudirect_used, 0 },
	{ "braid_comms", "gauge", "NCCL comms open, by kind (send, recv).", fam_comms, 0 },
	{ "braid_bytes_total", "counter", "Payload bytes sent (tx) or received (rx) by a device.",
	  fam_bytes, 0 },
	{ "braid_messages_total", "counter", "Messages sent (tx) or received (rx) by a device.",
	  fam_msgs, 0 },
	{ "braid_completions_total", "counter", "Requests completed on a device.", fam_dev,
	  DEV_COMPLETIONS },
	{ "braid_errors_total", "counter",
	  "Errors counted on a device's comms (error completions, failed requests).", fam_dev,
	  DEV_ERRORS },
	{ "braid_strangers_total", "counter",
	  "Connections to a listen port of the device dropped: not a braid peer of it.", fam_dev,
	  DEV_STRANGERS },
	{ "braid_slow_lanes_total", "counter",
	  "Times the NIC ran under half the rate of the other NICs of a fused comm.", fam_dev,
	  DEV_SLOW_LANES },
	{ "braid_stalls_total", "counter",
	  "Requests found still waiting BRAID_STALL_MS after they were posted (once each).",
	  fam_dev, DEV_STALLS },
	{ "braid_nic_slow", "gauge",
	  "1 when a comm striping over the NIC has it flagged slow now, else 0.", fam_nic_slow, 0 },
	{ "braid_av_entries", "gauge", "libfabric address vector entries in use (0 with verbs).",
	  fam_dev, DEV_AV_ENTRIES },
	{ "braid_qps", "gauge", "Verbs queue pairs in use on a device (ib backend only).", fam_qps,
	  0 },
	{ "braid_lane_bytes_total", "counter",
	  "Bytes a comm on a fused device sent over one of its NICs.", fam_lane, LANE_BYTES },
	{ "braid_lane_chunks_total", "counter",
	  "Chunks a comm on a fused device sent over one of its NICs.", fam_lane, LANE_CHUNKS },
	{ "braid_lane_rate_bytes_per_second", "gauge",
	  "Goodput striping measured on the NIC for the comm (0: not measured yet).", fam_lane,
	  LANE_RATE },
	{ "braid_lane_weight_ratio", "gauge",
	  "Share of a large message striping gives the NIC now, 0 to 1.", fam_lane, LANE_WEIGHT },
	{ "braid_lane_slow", "gauge",
	  "1 once the NIC was found under half the rate of the comm's other NICs.", fam_lane,
	  LANE_SLOW },
	{ "braid_lane_up", "gauge",
	  "1 while the NIC's port is up and it never failed under the comm or came back as "
	  "often as it failed (net_ib), else 0.",
	  fam_lane, LANE_UP },
	{ "braid_lane_failovers_total", "counter",
	  "Times the NIC failed under the comm and its traffic moved to the others (net_ib).",
	  fam_lane, LANE_FAILOVERS },
	{ "braid_lane_recoveries_total", "counter",
	  "Times the NIC came back after a failure and rejoined the comm's stripe (net_ib).",
	  fam_lane, LANE_RECOVERIES },
};

void stat_prom_render(FILE *f, const struct scan *s)
{
	int running = 0, ended = 0, unread = 0;

	for (size_t k = 0; k < sizeof(families) / sizeof(families[0]); k++) {
		const struct family *fm = &families[k];

		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fm->name, fm->help, fm->name, fm->type);
		for (size_t i = 0; i < s->n; i++)
			if (stat_ent_running(&s->e[i]))
				fm->fn(f, &s->e[i], fm);
	}
	for (size_t i = 0; i < s->n; i++) {
		if (stat_ent_running(&s->e[i]))
			running++;
		else if (s->e[i].kind == ENT_ENDED)
			ended++;
		else
			unread++;
	}
	fputs("# HELP braid_counters_files Counters files in the directory read: of running "
	      "processes, of processes that ended without removing theirs, not read (another "
	      "layout version, damaged, hidden by permissions).\n"
	      "# TYPE braid_counters_files gauge\n",
	      f);
	fprintf(f, "braid_counters_files{state=\"running\"} %d\n", running);
	fprintf(f, "braid_counters_files{state=\"ended\"} %d\n", ended);
	fprintf(f, "braid_counters_files{state=\"not_read\"} %d\n", unread);
}
