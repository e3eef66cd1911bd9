// SPDX-License-Identifier: Apache-2.0
/*
 * `braid topo` for people: GPUs, NICs, each GPU's rail with PCIe path types, warnings,
 * and the devices the plugin will show NCCL.
 */
#include <stdio.h>
#include <string.h>

#include "tools/topo_cli.h"
#include "tools/topo_netids.h"

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

void topo_print_human(const struct braid_topo *t, const struct plugin_devs *p)
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
