// SPDX-License-Identifier: Apache-2.0
/* `braid topo`: railId and planeId per device (topo_netids.h). */
#include "tools/topo_netids.h"

#include <stdio.h>

static void fmt_id(char *buf, size_t len, int id)
{
	if (id == NCCL_NET_ID_UNDEF)
		snprintf(buf, len, "-");
	else if (id >= 1 << 14)
		snprintf(buf, len, "0x%x", (unsigned)id); /* a fused device's plane set */
	else
		snprintf(buf, len, "%d", id);
}

void topo_netids_print(const struct net_props *props, int ndev, int api)
{
	char rail[16], plane[16];

	if (!props)
		return;
	printf("\nNCCL rail and plane ids");
	if (api < 12) {
		printf("\n  none: ncclNet v%d has no railId or planeId (NCCL takes them as "
		       "undefined); --api 12 shows them\n",
		       api);
		return;
	}
	printf(" (ncclNet v%d; - undefined)\n", api);
	printf("  %-4s %-24s %-7s %s\n", "dev", "name", "railId", "planeId");
	for (int d = 0; d < ndev; d++) {
		fmt_id(rail, sizeof(rail), props[d].rail_id);
		fmt_id(plane, sizeof(plane), props[d].plane_id);
		printf("  %-4d %-24s %-7s %s\n", d, props[d].name, rail, plane);
	}
}

static void json_id(const char *key, int id, int api)
{
	if (api < 12 || id == NCCL_NET_ID_UNDEF)
		printf(", \"%s\": null", key);
	else
		printf(", \"%s\": %d", key, id);
}

void topo_netids_json(const struct net_props *np, int api)
{
	json_id("rail_id", np->rail_id, api);
	json_id("plane_id", np->plane_id, api);
}
