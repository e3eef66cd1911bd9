/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNet v12's railId and planeId of each device braid shows NCCL. The rules, and how
 * NCCL uses the two ids, are in docs/topology.md ("Rail and plane ids for NCCL").
 *
 * railId: the NIC's rail from topo/ (rails are numbered by the GPU they serve, in PCI
 * bus id order, so two hosts built alike agree whatever order their NICs were found or
 * named in), unless a BRAID_IB_HCA / NCCL_IB_HCA entry gives one (then the list is the
 * only source: see braid_net_ids_assign). planeId: only from such an entry.
 */
#ifndef BRAID_NET_IDS_H
#define BRAID_NET_IDS_H

#include "plugin/backend.h"

struct braid_topo;

/*
 * Set rail_id and plane_id of the backend's n NICs. hca_spec: BRAID_IB_HCA as the ib
 * backend read it (NULL or "" for none, and for backends it does not steer). A spec that
 * does not parse gives no ids (the backend itself refuses it). When some entry of the
 * list gives a rail, every NIC takes its rail from the list (NCCL_NET_ID_UNDEF where its
 * entry gives none): two numberings cannot be mixed. Returns how many NICs' rails came
 * from the list.
 */
int braid_net_ids_assign(struct braid_dev_props *nics, int n, const struct braid_topo *topo,
			 const char *hca_spec);

/*
 * The ids of a device fused from n NICs. railId: the NICs' when they all share one, else
 * NCCL_NET_ID_UNDEF (as NCCL's IB transport). planeId: the NICs' when they all share
 * one; over several planes, all below 14, NCCL's virtual-plane bit (1 << 14) with one
 * bit per plane, so that NCCL pairs it only with a device fused over the same planes;
 * else NCCL_NET_ID_UNDEF.
 */
void braid_net_ids_merge(const struct braid_dev_props *const *nics, int n, int *rail_id,
			 int *plane_id);

#endif
