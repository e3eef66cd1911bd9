/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `braid topo`: the railId and planeId the plugin gives NCCL for each device (ncclNet
 * v12; docs/topology.md says where they come from and how NCCL uses them).
 */
#ifndef BRAID_TOOLS_TOPO_NETIDS_H
#define BRAID_TOOLS_TOPO_NETIDS_H

#include "tools/netapi.h"

/* The section of the human output; nothing when props is NULL (no devices were read). */
void topo_netids_print(const struct net_props *props, int ndev, int api);
/* The members of one device's JSON object: `, "rail_id": N, "plane_id": N` (null when
 * the version has none or the id is NCCL_NET_ID_UNDEF). */
void topo_netids_json(const struct net_props *np, int api);

#endif
