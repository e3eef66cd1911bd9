// SPDX-License-Identifier: Apache-2.0
/* railId and planeId (net_ids.h); the rules are in docs/topology.md. */
#include "plugin/net_ids.h"

#include "plugin/filter.h"
#include "plugin/log.h"
#include "topo/topo.h"

static int topo_rail(const struct braid_topo *topo, const char *name)
{
	int r = topo ? braid_topo_nic_rail(topo, name) : -1;

	return r >= 0 ? r : NCCL_NET_ID_UNDEF;
}

/* An exclude list's entries name what is left out: none gives a kept NIC an id. */
static int list_gives_rails(const struct braid_filter *f)
{
	for (int i = 0; i < f->n && !f->exclude; i++)
		if (f->item[i].rail >= 0)
			return 1;
	return 0;
}

int braid_net_ids_assign(struct braid_dev_props *nics, int n, const struct braid_topo *topo,
			 const char *hca_spec)
{
	struct braid_filter f;
	int from_list = 0, rails_from_list;

	if (!hca_spec || braid_filter_parse(hca_spec, &f))
		braid_filter_parse(NULL, &f);
	rails_from_list = list_gives_rails(&f);
	for (int d = 0; d < n; d++) {
		struct braid_dev_props *p = &nics[d];
		int e = braid_filter_entry(&f, p->name, p->port);
		int computed = topo_rail(topo, p->name);

		p->plane_id = e >= 0 ? f.item[e].plane : NCCL_NET_ID_UNDEF;
		p->rail_id = computed;
		if (!rails_from_list)
			continue;
		/* The list is the user's word on the fabric's wiring, which no topology shows;
		 * NCCL's IB transport reads the same list the same way. */
		p->rail_id = e >= 0 ? f.item[e].rail : NCCL_NET_ID_UNDEF;
		from_list++;
		if (p->rail_id != computed)
			BRAID_INFO(NCCL_INIT | NCCL_NET,
				   "%s:%d: railId %d from BRAID_IB_HCA/NCCL_IB_HCA (the topology "
				   "alone gives %d)",
				   p->name, p->port, p->rail_id, computed);
	}
	return from_list;
}

/* NCCL's IB transport marks a device fused over several planes with this bit (its
 * NCCL_IB_PLANE_VIRT_BIT), which no physical plane id may carry, plus one bit per plane. */
#define PLANE_VIRT_BIT (1 << 14)

void braid_net_ids_merge(const struct braid_dev_props *const *nics, int n, int *rail_id,
			 int *plane_id)
{
	int same_plane = 1, mask = PLANE_VIRT_BIT;

	*rail_id = n > 0 ? nics[0]->rail_id : NCCL_NET_ID_UNDEF;
	*plane_id = n > 0 ? nics[0]->plane_id : NCCL_NET_ID_UNDEF;
	for (int i = 0; i < n; i++) {
		int plane = nics[i]->plane_id;

		if (nics[i]->rail_id != *rail_id)
			*rail_id = NCCL_NET_ID_UNDEF;
		same_plane &= plane == *plane_id;
		/* a plane not known, or too large for the mask: the device has no plane */
		mask = mask >= 0 && plane >= 0 && plane < 14 ? mask | 1 << plane : -1;
	}
	if (!same_plane)
		*plane_id = mask >= 0 ? mask : NCCL_NET_ID_UNDEF;
}
