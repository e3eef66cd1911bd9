// SPDX-License-Identifier: Apache-2.0
/*
 * `braid topo [--xml FILE] [--json]`: show what topo/ found. Presentation only: every
 * fact and every warning comes from topo/topo.h, so the plugin and this command agree.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(__has_include)
#if __has_include("tools/cmds.h")
#include "tools/cmds.h"
#endif
#endif
#include "topo/topo.h"

/* Declared by tools/cmds.h too; repeated so this file builds on its own. */
int braid_cmd_topo(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f, "usage: braid topo [--xml FILE] [--json]\n"
		   "\n"
		   "Show the GPUs and NICs of this machine (or of a saved hwloc topology), which\n"
		   "NICs each GPU uses (its rail) with PCIe path types, and warnings to act on.\n"
		   "\n"
		   "  --xml FILE  read the topology from FILE (`lstopo --of xml FILE`) instead of\n"
		   "              this machine; $HWLOC_XMLFILE does the same when --xml is absent\n"
		   "  --json      print JSON (schema in docs/topology.md)\n"
		   "  -h, --help  this text\n");
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

static void print_human(const struct braid_topo *t)
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
	printf("%s]\n", n ? "\n  " : "");
}

static void print_json(const struct braid_topo *t)
{
	printf("{\n  \"schema\": \"braid-topo/1\",\n  \"source\": ");
	json_str(braid_topo_source(t));
	printf(",\n");
	json_gpus(t);
	json_nics(t);
	json_rails(t);
	json_paths(t);
	json_warnings(t);
	printf("}\n");
}

int braid_cmd_topo(int argc, char **argv)
{
	const char *xml = NULL;
	struct braid_topo *t;
	char err[512];
	int i, json = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--xml")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "braid topo: --xml needs a file name\n");
				usage(stderr);
				return 1;
			}
			xml = argv[++i];
		} else if (!strncmp(a, "--xml=", 6)) {
			xml = a + 6;
		} else {
			fprintf(stderr, "braid topo: unknown argument '%s'\n", a);
			usage(stderr);
			return 1;
		}
	}
	t = braid_topo_load(xml, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "braid topo: %s\n", err);
		return 1;
	}
	if (json)
		print_json(t);
	else
		print_human(t);
	braid_topo_free(t);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "braid topo: writing the output failed: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
