// SPDX-License-Identifier: Apache-2.0
/*
 * `braid topo [--xml FILE] [--json] [--api N] [--plugin PATH] [--no-plugin]`: show what
 * topo/ found, then the devices the plugin will show NCCL. Presentation only: every
 * topology fact and warning comes from topo/topo.h, so the plugin and this command agree;
 * the devices come from the plugin itself, loaded and initialised as NCCL would. The
 * parts: tools/topo_cli.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cmds.h"
#include "tools/topo_cli.h"

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
		topo_plugin_query(&plugin, plugin_path, api);
	}
	if (json)
		topo_print_json(t, &plugin);
	else
		topo_print_human(t, &plugin);
	topo_plugin_free(&plugin);
	braid_topo_free(t);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "braid topo: writing the output failed: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
