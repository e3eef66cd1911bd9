/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `braid topo`'s parts, each calling only downwards: the command (tools/topo.c) loads the
 * topology (topo/topo.h) and the plugin's devices (tools/topo_plugin.c), then prints both
 * for people (tools/topo_text.c) or as JSON (tools/topo_json.c).
 */
#ifndef BRAID_TOOLS_TOPO_CLI_H
#define BRAID_TOOLS_TOPO_CLI_H

#include <limits.h>

#include "tools/netapi.h"
#include "topo/topo.h"

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

/* tools/topo_plugin.c */
/* Load the plugin (path, or the default one), init it as NCCL would under api_version,
 * and fill p with its devices, or with why not. */
void topo_plugin_query(struct plugin_devs *p, const char *path, int api_version);
void topo_plugin_free(struct plugin_devs *p);
const char *topo_plugin_status_name(enum plugin_status s);

/* tools/topo_text.c, tools/topo_json.c: to stdout */
void topo_print_human(const struct braid_topo *t, const struct plugin_devs *p);
void topo_print_json(const struct braid_topo *t, const struct plugin_devs *p);

#endif
