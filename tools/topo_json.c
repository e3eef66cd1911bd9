// SPDX-License-Identifier: Apache-2.0
/*
 * `braid topo --json`: the same facts as the listing, as one JSON document (docs/topology.md
 * names the members).
 */
#include <stdio.h>
#include <string.h>

#include "tools/topo_cli.h"
#include "tools/topo_netids.h"

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

	printf("  \"plugin\": {\"status\": \"%s\", \"path\": ", topo_plugin_status_name(p->status));
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

void topo_print_json(const struct braid_topo *t, const struct plugin_devs *p)
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
