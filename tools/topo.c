// SPDX-License-Identifier: Apache-2.0
/*
 * `braid topo [--xml FILE] [--json] [--api N] [--plugin PATH] [--no-plugin]`: show what
 * topo/ found, then the devices the plugin will show NCCL. Presentation only: every
 * topology fact and warning comes from topo/topo.h, so the plugin and this command agree;
 * the devices come from the plugin itself, loaded and initialised as NCCL would.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cmds.h"
#include "tools/netapi.h"
#include "tools/topo_netids.h"
#include "topo/topo.h"

/*
 * braid links tools/netapi.c and tools/braid.c; the stand-alone driver of tests/topo
 * (tests/topo/topo_cli_main.c, tools/topo.c without the dispatcher) does not. Weak, these
 * are NULL there, and the devices section says that this build cannot load the plugin.
 */
#pragma weak netapi_open
#pragma weak netapi_bind
#pragma weak netapi_result_str
#pragma weak netapi_logger
#pragma weak netapi_log_prefix
#pragma weak braid_default_plugin

static void usage(FILE *f)
{
	fprintf(f,
		"usage: braid topo [--xml FILE] [--json] [--api N] [--plugin PATH] [--no-plugin]\n"
		"\n"
		"Show the GPUs and NICs of this machine (or of a saved hwloc topology), which\n"
		"NICs each GPU uses (its rail) with PCIe path types, warnings to act on, and\n"
		"the devices the plugin will show NCCL (NICs fused by BRAID_MERGE as one).\n"
		"\n"
		"  --xml FILE     read the topology from FILE (`lstopo --of xml FILE`) instead of\n"
		"                 this machine; $HWLOC_XMLFILE does the same when --xml is absent.\n"
		"                 The plugin is given the same file (HWLOC_XMLFILE=FILE)\n"
		"  --json         print JSON (schema in docs/topology.md)\n"
		"  --api N        load the plugin as ncclNet vN, 8 to 12 (default 12); what\n"
		"                 BRAID_MERGE=auto means depends on it: rail for 8, none from 9\n"
		"  --plugin PATH  the plugin .so (or a NAME for libnccl-net-NAME.so); default:\n"
		"                 libnccl-net-braid.so next to this binary or in ../lib, else by name\n"
		"  --no-plugin    do not load the plugin: topology only\n"
		"  -h, --help     this text\n");
}

static const char *warn_code_name(enum braid_topo_warn_code c)
{
	switch (c) {
	case BRAID_TOPO_WARN_GPU_SYS: return "gpu_sys";
	case BRAID_TOPO_WARN_NIC_FAR: return "nic_far";
	case BRAID_TOPO_WARN_MIXED_SPEED: return "mixed_speed";
	case BRAID_TOPO_WARN_NO_RDMA: return "no_rdma";
	}
	return "unknown";
}

static void fmt_int(char *buf, size_t len, int v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%d", v);
}

static void fmt_speed(char *buf, size_t len, double gbytes)
{
	if (gbytes > 0)
		snprintf(buf, len, "%.1f GB/s", gbytes);
	else
		snprintf(buf, len, "?");
}

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

static void gpu_name(const struct braid_topo_gpu_info *g, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", or_dash(g->bus_id[0] ? g->bus_id : g->osdev),
		 g->bus_id[0] && g->osdev[0] ? " " : "", g->bus_id[0] ? g->osdev : "");
}

/* ---------------------------------------------------------------- the plugin's devices */

#define PLUGIN_MAX_WARNS 8
#define PLUGIN_DEFAULT_API 12

enum plugin_status {
	PLUGIN_SKIPPED,     /* --no-plugin */
	PLUGIN_UNAVAILABLE, /* this build has no plugin loader (the tests' stand-alone driver) */
	PLUGIN_NOT_LOADED,  /* dlopen failed, or no ncclNetPlugin_v<api> */
	PLUGIN_FAILED,      /* init, devices or getProperties failed */
	PLUGIN_OK,
};

struct plugin_devs {
	enum plugin_status status;
	int api;
	char path[PATH_MAX]; /* what was loaded, else what was asked for */
	const char *merge;   /* BRAID_MERGE as the plugin read it: the value, or "auto" */
	int merge_from_env;  /* 0: the default (auto) */
	char reason[2048];   /* PLUGIN_NOT_LOADED, PLUGIN_FAILED: why */
	int ndev;
	struct net_props *props; /* ndev of them */
	int nwarn;               /* WARN lines the plugin logged, the first PLUGIN_MAX_WARNS kept */
	char warns[PLUGIN_MAX_WARNS][1024];
	char last_warn[1024];
};

/* What topo_logger writes into; the plugin may log from its own threads. */
static struct plugin_devs *log_target;
static atomic_flag log_lock = ATOMIC_FLAG_INIT;

static void log_lock_take(void)
{
	while (atomic_flag_test_and_set_explicit(&log_lock, memory_order_acquire))
		;
}

static void log_lock_give(void)
{
	atomic_flag_clear_explicit(&log_lock, memory_order_release);
}

static const char *plugin_status_name(enum plugin_status s)
{
	switch (s) {
	case PLUGIN_SKIPPED: return "skipped";
	case PLUGIN_UNAVAILABLE: return "unavailable";
	case PLUGIN_NOT_LOADED: return "not_loaded";
	case PLUGIN_FAILED: return "failed";
	case PLUGIN_OK: return "ok";
	}
	return "unknown";
}

/*
 * The plugin's logger. WARNs are kept for the section (the last one logged during a
 * failed init is the plugin's reason) rather than printed, so stderr stays quiet; with
 * NCCL_DEBUG set every line also goes to netapi_logger, which prints as NCCL would.
 */
__attribute__((format(printf, 5, 6))) static void topo_logger(ncclDebugLogLevel level,
							      unsigned long flags, const char *file,
							      int line, const char *fmt, ...)
{
	static const char prefix[] = "NET/braid : ";
	const char *text;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (getenv("NCCL_DEBUG") && netapi_logger)
		netapi_logger(level, flags, file, line, "%s", msg);
	if (level != NCCL_LOG_WARN)
		return;
	text = strncmp(msg, prefix, sizeof(prefix) - 1) ? msg : msg + sizeof(prefix) - 1;
	log_lock_take();
	if (log_target) {
		struct plugin_devs *p = log_target;

		if (p->nwarn < PLUGIN_MAX_WARNS)
			snprintf(p->warns[p->nwarn], sizeof(p->warns[0]), "%s", text);
		snprintf(p->last_warn, sizeof(p->last_warn), "%s", text);
		p->nwarn++;
	}
	log_lock_give();
}

/*
 * init as netapi's shims do, but with topo_logger: netapi's init passes netapi_logger,
 * which prints the plugin's WARNs to stderr where this command could not quote them.
 * v11: one context, released by api->finalize; v8..v10 have no finalize (NCCL inits once
 * per process and never finalizes), so *ctx stays NULL.
 */
static ncclResult_t plugin_init(const struct net_api *api, void **ctx)
{
	ncclNetCommConfig_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

	*ctx = NULL;
	switch (api->version) {
	case 8: return ((const ncclNet_v8_t *)api->table)->init(topo_logger);
	case 9: return ((const ncclNet_v9_t *)api->table)->init(topo_logger);
	case 10: return ((const ncclNet_v10_t *)api->table)->init(topo_logger, NULL);
	case 11:
		return ((const ncclNet_v11_t *)api->table)
			->init(ctx, (uint64_t)getpid(), &config, topo_logger, NULL);
	case 12:
		return ((const ncclNet_v12_t *)api->table)
			->init(ctx, (uint64_t)getpid(), &config, topo_logger, NULL);
	}
	return ncclInvalidArgument;
}

static void plugin_fail(struct plugin_devs *p, const char *call, ncclResult_t r)
{
	p->status = PLUGIN_FAILED;
	log_lock_take();
	snprintf(p->reason, sizeof(p->reason), "%s returned %s%s%s", call, netapi_result_str(r),
		 p->last_warn[0] ? ": " : "", p->last_warn);
	log_lock_give();
}

/*
 * Load the plugin (`value`, NULL: braid's default) as ncclNet v<api>, init it, read its
 * devices' properties, finalize it. The plugin reads its topology from $HWLOC_XMLFILE,
 * set by the caller for --xml. The handle is never dlclose()d: without finalize (v8..v10)
 * the plugin may still hold threads, and it registers atexit handlers.
 */
static void plugin_query(struct plugin_devs *p, const char *value, int api_version)
{
	const char *merge = getenv("BRAID_MERGE");
	char plugin[PATH_MAX];
	struct net_api api;
	ncclResult_t r;
	void *dl, *ctx = NULL;
	int n = 0;

	p->api = api_version;
	p->merge_from_env = merge && *merge;
	p->merge = p->merge_from_env ? merge : "auto";
	if (!netapi_open || !netapi_bind || !netapi_result_str || !braid_default_plugin) {
		p->status = PLUGIN_UNAVAILABLE;
		snprintf(p->reason, sizeof(p->reason),
			 "this build of braid topo cannot load the plugin (use the braid command)");
		return;
	}
	if (netapi_logger) /* netapi.c defines both */
		snprintf(netapi_log_prefix, sizeof(netapi_log_prefix), "braid-topo");
	if (value)
		snprintf(plugin, sizeof(plugin), "%s", value);
	else
		braid_default_plugin(plugin, sizeof(plugin));
	snprintf(p->path, sizeof(p->path), "%s", plugin);
	dl = netapi_open(plugin, p->path, sizeof(p->path), p->reason, sizeof(p->reason));
	if (!dl) {
		p->status = PLUGIN_NOT_LOADED;
		return;
	}
	if (netapi_bind(dl, api_version, &api)) {
		p->status = PLUGIN_NOT_LOADED;
		snprintf(p->reason, sizeof(p->reason), "it exports no ncclNetPlugin_v%d",
			 api_version);
		return;
	}
	log_target = p;
	r = plugin_init(&api, &ctx);
	if (r != ncclSuccess) {
		/* a failed init holds nothing: no finalize */
		plugin_fail(p, "init", r);
		goto out;
	}
	r = api.devices(&api, &n);
	if (r != ncclSuccess) {
		plugin_fail(p, "devices", r);
		goto fini;
	}
	p->props = n > 0 ? calloc((size_t)n, sizeof(*p->props)) : NULL;
	if (n > 0 && !p->props) {
		p->status = PLUGIN_FAILED;
		snprintf(p->reason, sizeof(p->reason), "out of memory for %d devices", n);
		goto fini;
	}
	for (int d = 0; d < n; d++) {
		r = api.get_props(&api, d, &p->props[d]);
		if (r != ncclSuccess) {
			char call[64];

			snprintf(call, sizeof(call), "getProperties(%d)", d);
			plugin_fail(p, call, r);
			goto fini;
		}
	}
	p->ndev = n;
	p->status = PLUGIN_OK;
fini:
	r = api.finalize(&api, ctx); /* v11: balances init; a no-op before */
	if (r != ncclSuccess && p->status == PLUGIN_OK)
		plugin_fail(p, "finalize", r);
out:
	log_lock_take();
	log_target = NULL; /* later lines (the plugin's threads) are no longer kept */
	log_lock_give();
}

static void plugin_free(struct plugin_devs *p)
{
	free(p->props);
	p->props = NULL;
	p->ndev = 0;
}

/* What BRAID_MERGE=auto stands for under this API version (plugin/vdev.c). */
static const char *merge_auto_meaning(int api)
{
	return api < 9 ? "rail under ncclNet v8" : "none under ncclNet v9+";
}

static void fmt_vprops(const struct net_props *np, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; i < np->vdev_ndevs && i < 4 && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%d", i ? "," : "{", np->vdev_devs[i]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (used < len)
		snprintf(buf + used, len - used, "%s", np->vdev_ndevs > 0 ? "}" : "{}");
}

static void fmt_mbps(char *buf, size_t len, int mbps)
{
	if (mbps <= 0)
		snprintf(buf, len, "?");
	else if (mbps % 1000 == 0)
		snprintf(buf, len, "%d Gb/s", mbps / 1000);
	else
		snprintf(buf, len, "%.1f Gb/s", mbps / 1000.0);
}

/* ---------------------------------------------------------------- human output */

static void print_gpus(const struct braid_topo *t)
{
	int i, n = braid_topo_gpu_count(t);

	printf("GPUs (%d)\n", n);
	if (!n) {
		printf("  none\n");
		return;
	}
	printf("  %-14s %-6s %-5s %-10s %-4s %s\n", "bus id", "CUDA", "NUMA", "link", "rail",
	       "model");
	for (i = 0; i < n; i++) {
		struct braid_topo_gpu_info g;
		char cuda[16], numa[16], rail[16], speed[32];

		braid_topo_gpu_info(t, i, &g);
		fmt_int(cuda, sizeof(cuda), g.cuda_index);
		if (g.cuda_index >= 0 && g.cuda_index_guessed)
			strcat(cuda, "?");
		fmt_int(numa, sizeof(numa), g.numa_node);
		fmt_int(rail, sizeof(rail), g.rail);
		fmt_speed(speed, sizeof(speed), g.link_gbytes);
		printf("  %-14s %-6s %-5s %-10s %-4s %s\n", or_dash(g.bus_id), cuda, numa, speed,
		       rail, or_dash(g.model));
	}
}

static void print_nics(const struct braid_topo *t)
{
	int i, n = braid_topo_nic_count(t);

	printf("NICs (%d)\n", n);
	if (!n) {
		printf("  none\n");
		return;
	}
	printf("  %-12s %-7s %-14s %-10s %-5s %-4s %-8s %s\n", "name", "kind", "bus id", "link",
	       "NUMA", "rail", "netdev", "model");
	for (i = 0; i < n; i++) {
		struct braid_topo_nic_info c;
		char numa[16], rail[16], speed[32];

		braid_topo_nic_info(t, i, &c);
		fmt_int(numa, sizeof(numa), c.numa_node);
		fmt_int(rail, sizeof(rail), c.rail);
		fmt_speed(speed, sizeof(speed), c.link_gbytes);
		printf("  %-12s %-7s %-14s %-10s %-5s %-4s %-8s %s\n", c.name,
		       braid_topo_nic_kind_name(c.kind), c.bus_id[0] ? c.bus_id : "virtual", speed,
		       numa, rail, or_dash(c.netdev), or_dash(c.model));
	}
}

static void print_map(const struct braid_topo *t)
{
	int g, n, ngpu = braid_topo_gpu_count(t), nnic = braid_topo_nic_count(t), unused = 0;

	printf("GPU-to-rail map (%d rail%s; each NIC with its path type and distance)\n",
	       braid_topo_rail_count(t), braid_topo_rail_count(t) == 1 ? "" : "s");
	if (!ngpu || !nnic) {
		printf("  none: %s\n", !ngpu ? "no GPU" : "no NIC");
		return;
	}
	for (g = 0; g < ngpu; g++) {
		struct braid_topo_gpu_info gi;
		char name[64];
		int first = 1;

		braid_topo_gpu_info(t, g, &gi);
		gpu_name(&gi, name, sizeof(name));
		if (gi.rail < 0) {
			printf("  %-20s no rail\n", name);
			continue;
		}
		printf("  %-20s rail %-3d", name, gi.rail);
		for (n = 0; n < nnic; n++) {
			struct braid_topo_nic_info ni;
			enum braid_topo_path p;
			int d;

			braid_topo_nic_info(t, n, &ni);
			if (ni.rail != gi.rail)
				continue;
			braid_topo_path(t, g, n, &p, &d);
			if (d >= 0)
				printf("%s%s %s/%d", first ? " " : ", ", ni.name,
				       braid_topo_path_name(p), d);
			else
				printf("%s%s %s/?", first ? " " : ", ", ni.name,
				       braid_topo_path_name(p));
			first = 0;
		}
		printf("\n");
	}
	for (n = 0; n < nnic; n++) {
		struct braid_topo_nic_info ni;

		braid_topo_nic_info(t, n, &ni);
		if (ni.rail >= 0)
			continue;
		printf("%s%s", unused ? ", " : "  in no rail: ", ni.name);
		unused++;
	}
	if (unused)
		printf("\n");
}

/* The devices section, after everything else (absent with --no-plugin). */
static void print_devices(const struct plugin_devs *p)
{
	char speed[32], vp[64];

	if (p->status == PLUGIN_SKIPPED)
		return;
	printf("\nNCCL devices");
	if (p->status == PLUGIN_OK)
		printf(" (%d)", p->ndev);
	printf(" from the plugin as ncclNet v%d, BRAID_MERGE=%s", p->api, p->merge);
	if (!p->merge_from_env)
		printf(" (%s)", merge_auto_meaning(p->api));
	printf("\n");
	if (p->path[0])
		printf("  plugin: %s\n", p->path);
	switch (p->status) {
	case PLUGIN_SKIPPED: return;
	case PLUGIN_UNAVAILABLE: printf("  none: %s\n", p->reason); return;
	case PLUGIN_NOT_LOADED:
		printf("  none: the plugin could not be loaded: %s\n", p->reason);
		return;
	case PLUGIN_FAILED:
		printf("  none: the plugin could not initialise: %s\n", p->reason);
		return;
	case PLUGIN_OK: break;
	}
	if (!p->ndev)
		printf("  none\n");
	else if (p->api >= 9)
		printf("  %-4s %-24s %-10s %s\n", "dev", "name", "speed", "vProps");
	else
		printf("  %-4s %-24s %s\n", "dev", "name", "speed");
	for (int d = 0; d < p->ndev; d++) {
		const struct net_props *np = &p->props[d];

		fmt_mbps(speed, sizeof(speed), np->speed);
		if (p->api >= 9) {
			fmt_vprops(np, vp, sizeof(vp));
			printf("  %-4d %-24s %-10s %s\n", d, np->name, speed, vp);
		} else {
			printf("  %-4d %-24s %s\n", d, np->name, speed);
		}
	}
	for (int i = 0; i < p->nwarn && i < PLUGIN_MAX_WARNS; i++)
		printf("  plugin WARN: %s\n", p->warns[i]);
	if (p->nwarn > PLUGIN_MAX_WARNS)
		printf("  plugin WARN: ... and %d more\n", p->nwarn - PLUGIN_MAX_WARNS);
}

static void print_human(const struct braid_topo *t, const struct plugin_devs *p)
{
	int i, n;

	printf("topology: %s\n\n", braid_topo_source(t));
	print_gpus(t);
	printf("\n");
	print_nics(t);
	printf("\n");
	print_map(t);
	printf("\nwarnings (%d)\n", braid_topo_warning_count(t));
	n = braid_topo_warning_count(t);
	if (!n)
		printf("  none\n");
	for (i = 0; i < n; i++) {
		struct braid_topo_warning w;

		braid_topo_warning(t, i, &w);
		printf("WARNING: %s\n", w.text);
	}
	n = braid_topo_note_count(t);
	if (n) {
		printf("\nnot seen (%d)\n", n);
		for (i = 0; i < n; i++)
			printf("  note: %s\n", braid_topo_note(t, i));
	}
	print_devices(p);
	topo_netids_print(p->status == PLUGIN_OK ? p->props : NULL, p->ndev, p->api);
}

/* ---------------------------------------------------------------- JSON output */

static void json_str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			printf("\\n");
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_opt_str(const char *s)
{
	if (s && *s)
		json_str(s);
	else
		printf("null");
}

static void json_opt_int(int v)
{
	if (v < 0)
		printf("null");
	else
		printf("%d", v);
}

static void json_speed(double v)
{
	if (v > 0)
		printf("%.3f", v);
	else
		printf("null");
}

static void json_gpus(const struct braid_topo *t)
{
	int i, n = braid_topo_gpu_count(t);

	printf("  \"gpus\": [");
	for (i = 0; i < n; i++) {
		struct braid_topo_gpu_info g;

		braid_topo_gpu_info(t, i, &g);
		printf("%s\n    {\"index\": %d, \"bus_id\": ", i ? "," : "", i);
		json_opt_str(g.bus_id);
		printf(", \"osdev\": ");
		json_opt_str(g.osdev);
		printf(", \"cuda_index\": ");
		json_opt_int(g.cuda_index);
		printf(", \"cuda_index_guessed\": %s, \"model\": ",
		       g.cuda_index_guessed ? "true" : "false");
		json_opt_str(g.model);
		printf(", \"link_gbytes\": ");
		json_speed(g.link_gbytes);
		printf(", \"numa_node\": ");
		json_opt_int(g.numa_node);
		printf(", \"rail\": ");
		json_opt_int(g.rail);
		printf("}");
	}
	printf("%s],\n", n ? "\n  " : "");
}

static void json_nics(const struct braid_topo *t)
{
	int i, n = braid_topo_nic_count(t);

	printf("  \"nics\": [");
	for (i = 0; i < n; i++) {
		struct braid_topo_nic_info c;

		braid_topo_nic_info(t, i, &c);
		printf("%s\n    {\"index\": %d, \"name\": ", i ? "," : "", i);
		json_str(c.name);
		printf(", \"kind\": ");
		json_str(braid_topo_nic_kind_name(c.kind));
		printf(", \"rdma\": %s, \"netdev\": ", c.rdma ? "true" : "false");
		json_opt_str(c.netdev);
		printf(", \"bus_id\": ");
		json_opt_str(c.bus_id);
		printf(", \"pci_path\": ");
		json_opt_str(c.pci_path);
		printf(", \"model\": ");
		json_opt_str(c.model);
		printf(", \"link_gbytes\": ");
		json_speed(c.link_gbytes);
		printf(", \"numa_node\": ");
		json_opt_int(c.numa_node);
		printf(", \"rail\": ");
		json_opt_int(c.rail);
		printf("}");
	}
	printf("%s],\n", n ? "\n  " : "");
}

static void json_rails(const struct braid_topo *t)
{
	int r, i, nr = braid_topo_rail_count(t);

	printf("  \"rails\": [");
	for (r = 0; r < nr; r++) {
		int first = 1;

		printf("%s\n    {\"rail\": %d, \"gpus\": [", r ? "," : "", r);
		for (i = 0; i < braid_topo_gpu_count(t); i++) {
			struct braid_topo_gpu_info g;

			braid_topo_gpu_info(t, i, &g);
			if (g.rail != r)
				continue;
			printf("%s%d", first ? "" : ", ", i);
			first = 0;
		}
		printf("], \"nics\": [");
		first = 1;
		for (i = 0; i < braid_topo_nic_count(t); i++) {
			struct braid_topo_nic_info c;

			braid_topo_nic_info(t, i, &c);
			if (c.rail != r)
				continue;
			printf("%s%d", first ? "" : ", ", i);
			first = 0;
		}
		printf("]}");
	}
	printf("%s],\n", nr ? "\n  " : "");
}

static void json_paths(const struct braid_topo *t)
{
	int g, n, first = 1;

	printf("  \"paths\": [");
	for (g = 0; g < braid_topo_gpu_count(t); g++)
		for (n = 0; n < braid_topo_nic_count(t); n++) {
			enum braid_topo_path p;
			int d;

			braid_topo_path(t, g, n, &p, &d);
			printf("%s\n    {\"gpu\": %d, \"nic\": %d, \"path\": \"%s\", \"distance\": ",
			       first ? "" : ",", g, n, braid_topo_path_name(p));
			json_opt_int(d);
			printf("}");
			first = 0;
		}
	printf("%s],\n", first ? "" : "\n  ");
}

static void json_warnings(const struct braid_topo *t)
{
	int i, n = braid_topo_warning_count(t);

	printf("  \"warnings\": [");
	for (i = 0; i < n; i++) {
		struct braid_topo_warning w;

		braid_topo_warning(t, i, &w);
		printf("%s\n    {\"code\": \"%s\", \"gpu\": ", i ? "," : "",
		       warn_code_name(w.code));
		json_opt_int(w.gpu);
		printf(", \"nic\": ");
		json_opt_int(w.nic);
		printf(", \"rail\": ");
		json_opt_int(w.rail);
		printf(", \"text\": ");
		json_str(w.text);
		printf("}");
	}
	printf("%s],\n", n ? "\n  " : "");
	n = braid_topo_note_count(t);
	printf("  \"notes\": [");
	for (i = 0; i < n; i++) {
		printf("%s\n    ", i ? "," : "");
		json_str(braid_topo_note(t, i));
	}
	printf("%s],\n", n ? "\n  " : "");
}

static void json_plugin(const struct plugin_devs *p)
{
	int i, n = p->nwarn < PLUGIN_MAX_WARNS ? p->nwarn : PLUGIN_MAX_WARNS;

	printf("  \"plugin\": {\"status\": \"%s\", \"path\": ", plugin_status_name(p->status));
	json_opt_str(p->path);
	printf(", \"api\": ");
	json_opt_int(p->status == PLUGIN_SKIPPED ? -1 : p->api);
	printf(", \"merge\": ");
	json_opt_str(p->status == PLUGIN_SKIPPED ? NULL : p->merge);
	printf(", \"reason\": ");
	json_opt_str(p->status == PLUGIN_OK ? NULL : p->reason);
	printf(", \"warnings\": [");
	for (i = 0; i < n; i++) {
		printf("%s", i ? ", " : "");
		json_str(p->warns[i]);
	}
	printf("]},\n");
	if (p->status != PLUGIN_OK) {
		printf("  \"devices\": null\n");
		return;
	}
	printf("  \"devices\": [");
	for (i = 0; i < p->ndev; i++) {
		const struct net_props *np = &p->props[i];

		printf("%s\n    {\"index\": %d, \"name\": ", i ? "," : "", i);
		json_str(np->name);
		printf(", \"speed_mbps\": %d, \"port\": %d, \"pci_path\": ", np->speed, np->port);
		json_opt_str(np->pci_path);
		printf(", \"vprops\": ");
		if (p->api < 9) {
			printf("null");
		} else {
			printf("[");
			for (int k = 0; k < np->vdev_ndevs && k < 4; k++)
				printf("%s%d", k ? ", " : "", np->vdev_devs[k]);
			printf("]");
		}
		topo_netids_json(np, p->api);
		printf("}");
	}
	printf("%s]\n", p->ndev ? "\n  " : "");
}

static void print_json(const struct braid_topo *t, const struct plugin_devs *p)
{
	printf("{\n  \"schema\": \"braid-topo/1\",\n  \"source\": ");
	json_str(braid_topo_source(t));
	printf(",\n");
	json_gpus(t);
	json_nics(t);
	json_rails(t);
	json_paths(t);
	json_warnings(t);
	json_plugin(p);
	printf("}\n");
}

int braid_cmd_topo(int argc, char **argv)
{
	struct plugin_devs plugin = { .status = PLUGIN_SKIPPED };
	const char *xml = NULL, *plugin_path = NULL;
	struct braid_topo *t;
	char err[512];
	int i, json = 0, load_plugin = 1, api = PLUGIN_DEFAULT_API;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--json")) {
			json = 1;
			continue;
		} else if (!strcmp(a, "--no-plugin")) {
			load_plugin = 0;
			continue;
		}
		/* options with a value: --opt VALUE or --opt=VALUE */
		static const char *const with_value[] = { "--xml", "--api", "--plugin" };
		const char *opt = NULL;

		for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
			size_t len = strlen(with_value[k]);

			if (!strcmp(a, with_value[k])) {
				opt = with_value[k];
				if (i + 1 < argc)
					val = argv[++i];
			} else if (!strncmp(a, with_value[k], len) && a[len] == '=') {
				opt = with_value[k];
				val = a + len + 1;
			}
		}
		if (!opt) {
			fprintf(stderr, "braid topo: unknown argument '%s'\n", a);
			usage(stderr);
			return 1;
		}
		if (!val) {
			fprintf(stderr, "braid topo: %s needs a %s\n", opt,
				!strcmp(opt, "--api") ? "version" : "file name");
			usage(stderr);
			return 1;
		}
		if (!strcmp(opt, "--xml")) {
			xml = val;
		} else if (!strcmp(opt, "--plugin")) {
			plugin_path = val;
		} else {
			char *end;
			long v;

			errno = 0;
			v = strtol(val, &end, 10);
			if (errno || end == val || *end || v < NETAPI_MIN_VERSION ||
			    v > NETAPI_MAX_VERSION) {
				fprintf(stderr, "braid topo: --api %s: the versions are %d to %d\n",
					val, NETAPI_MIN_VERSION, NETAPI_MAX_VERSION);
				usage(stderr);
				return 1;
			}
			api = (int)v;
		}
	}
	t = braid_topo_load(xml, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "braid topo: %s\n", err);
		return 1;
	}
	if (load_plugin) {
		/* The plugin reads its topology from $HWLOC_XMLFILE (topo/topo_load.c). */
		if (xml && setenv("HWLOC_XMLFILE", xml, 1)) {
			fprintf(stderr, "braid topo: setenv(HWLOC_XMLFILE): %s\n", strerror(errno));
			braid_topo_free(t);
			return 1;
		}
		plugin_query(&plugin, plugin_path, api);
	}
	if (json)
		print_json(t, &plugin);
	else
		print_human(t, &plugin);
	plugin_free(&plugin);
	braid_topo_free(t);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "braid topo: writing the output failed: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
