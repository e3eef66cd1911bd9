// SPDX-License-Identifier: Apache-2.0
/*
 * `braid topo`'s devices section: the plugin loaded and initialised as NCCL would, its
 * devices and properties, and the WARNs it logged on the way (the last one of a failed
 * init is its reason).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cmds.h"
#include "tools/topo_cli.h"

/*
 * braid links tools/netapi.c and tools/braid.c; the stand-alone driver of tests/topo
 * (tests/topo/topo_cli_main.c, tools/topo*.c without the dispatcher) does not. Weak, these
 * are NULL there, and the devices section says that this build cannot load the plugin.
 */
#pragma weak netapi_open
#pragma weak netapi_bind
#pragma weak netapi_result_str
#pragma weak netapi_logger
#pragma weak netapi_log_prefix
#pragma weak braid_default_plugin

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

const char *topo_plugin_status_name(enum plugin_status s)
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
void topo_plugin_query(struct plugin_devs *p, const char *value, int api_version)
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

void topo_plugin_free(struct plugin_devs *p)
{
	free(p->props);
	p->props = NULL;
	p->ndev = 0;
}
