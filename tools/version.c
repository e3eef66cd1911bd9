// SPDX-License-Identifier: Apache-2.0
/* `braid version`: braid's version and which NCCL net ABI versions the plugin exports. */
#include "tools/cmds.h"

#include <dlfcn.h>
#include <getopt.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>

#include "tools/netapi.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: braid version [--plugin PATH]\n"
		"\n"
		"Print braid's version and, for the plugin .so that braid would load, its path\n"
		"and which ncclNetPlugin_vN symbols it exports with their names. The plugin is\n"
		"only loaded, never initialised.\n"
		"\n"
		"  --plugin PATH  the .so (or a NAME for libnccl-net-NAME.so, as NCCL_NET_PLUGIN);\n"
		"                 default: libnccl-net-braid.so next to this binary or in ../lib, else by name\n");
}

int braid_cmd_version(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "plugin", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char plugin[PATH_MAX], loaded[PATH_MAX], err[2048];
	const char *value = NULL;
	struct link_map *lm = NULL;
	int c, found = 0;
	void *dl;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': value = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	printf("braid %s\n", BRAID_VERSION);
	if (!value) {
		braid_default_plugin(plugin, sizeof(plugin));
		value = plugin;
	}
	dl = netapi_open(value, loaded, sizeof(loaded), err, sizeof(err));
	if (!dl) {
		printf("plugin: not loadable: %s\n", err);
		return 1;
	}
	if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
		printf("plugin: %s\n", lm->l_name);
	else
		printf("plugin: %s\n", loaded);
	for (int v = NETAPI_MAX_VERSION; v >= NETAPI_MIN_VERSION; v--) {
		struct net_api api;

		if (netapi_bind(dl, v, &api)) {
			printf("  ncclNetPlugin_v%-2d  absent\n", v);
			continue;
		}
		found++;
		printf("  ncclNetPlugin_v%-2d  name \"%s\"\n", v, api.name ? api.name : "(null)");
	}
	if (!found) {
		printf("plugin exports no ncclNetPlugin_v%d..v%d: NCCL would not use it\n",
		       NETAPI_MIN_VERSION, NETAPI_MAX_VERSION);
		return 1;
	}
	return 0;
}
