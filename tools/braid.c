// SPDX-License-Identifier: Apache-2.0
/* braid: one command, subcommands in their own files (tools/cmds.h). */
#include "tools/cmds.h"

#include <stdio.h>
#include <string.h>

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "version", braid_cmd_version, "braid's version and what the plugin .so exports" },
	{ "perf", braid_cmd_perf,
	  "bandwidth and latency between two processes through the "
	  "plugin, as NCCL drives it" },
	{ "stat", braid_cmd_stat,
	  "every braid process of this host: backend, slow path, GPUDirect, "
	  "counters and rates" },
	{ "doctor", braid_cmd_doctor,
	  "check this host for NCCL over braid: libraries, plugin, env, ports, "
	  "GIDs, PFC/ECN, GPUDirect, topology" },
#ifdef BRAID_HAVE_TOPO
	{ "topo", braid_cmd_topo, "GPUs, NICs, rails and PCIe paths of this machine" },
#endif
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: braid COMMAND [options]\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n`braid help COMMAND` or `braid COMMAND --help` for a command's options.\n");
}

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct command *c;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version"))
		return braid_cmd_version(1, (char *[]){ "version", NULL });
	if (!strcmp(argv[1], "help")) {
		if (argc < 3) {
			usage(stdout);
			return 0;
		}
		c = find(argv[2]);
		if (!c) {
			fprintf(stderr, "braid: no command '%s'\n\n", argv[2]);
			usage(stderr);
			return 2;
		}
		return c->run(2, (char *[]){ (char *)c->name, "--help", NULL });
	}
	c = find(argv[1]);
	if (!c) {
		fprintf(stderr, "braid: no command '%s'\n\n", argv[1]);
		usage(stderr);
		return 2;
	}
	return c->run(argc - 1, argv + 1);
}
